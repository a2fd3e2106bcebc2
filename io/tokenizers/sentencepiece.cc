// SentencePiece tokenizer: the library's ids, Python-compatible handling of ill-formed UTF-8 and
// Hugging Face T5's sentinel convention (see sentencepiece.h).
#include "io/tokenizers/sentencepiece.h"

#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "io/tokenizers/factories.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io {
namespace {

constexpr absl::string_view kSentinelPrefix = "<extra_id_";

// Parses "<extra_id_K>" at text[pos]; returns K and sets *length, or -1.
int64_t parse_sentinel(absl::string_view text, size_t pos, size_t* length) {
  size_t i = pos + kSentinelPrefix.size();
  int64_t k = 0;
  const size_t digits_begin = i;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - digits_begin < 9) {
    k = k * 10 + (text[i] - '0');
    ++i;
  }
  if (i == digits_begin || i >= text.size() || text[i] != '>') return -1;
  // "<extra_id_01>" is not a sentinel (str(k) has no leading zeros).
  if (text[digits_begin] == '0' && i - digits_begin > 1) return -1;
  *length = i + 1 - pos;
  return k;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::load(
    const std::string& model_file, int vocab_extra_ids) {
  if (!std::ifstream(model_file, std::ios::binary).good()) {
    return absl::NotFoundError(absl::StrCat("SentencePiece model '", model_file, "': cannot open"));
  }
  if (vocab_extra_ids < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("SentencePiece: vocab_extra_ids must be >= 0, got ", vocab_extra_ids));
  }
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
  const std::string error = tok->processor_.load(model_file);
  if (!error.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SentencePiece model '", model_file, "' is not a valid .model file: ", error));
  }
  tok->pieces_ = tok->processor_.piece_size();
  tok->extra_ids_ = vocab_extra_ids;
  SpecialTokens& s = tok->special_;
  s.pad = tok->processor_.pad_id();
  s.eos = tok->processor_.eos_id();
  s.unk = tok->processor_.unk_id();
  s.bos = tok->processor_.bos_id();
  s.eod = s.eos;
  for (int k = 0; k < vocab_extra_ids; ++k) {
    s.sentinels.push_back(tok->pieces_ + vocab_extra_ids - 1 - k);
  }
  return tok;
}

void SentencePieceTokenizer::encode_plain(absl::string_view text, std::vector<int32_t>* out) const {
  if (text.empty()) return;
  std::vector<int> ids;
  const std::string error = processor_.encode(std::string_view(text.data(), text.size()), &ids);
  // The library only fails when no model is loaded, which load() excludes.
  ANVIL_CHECK_MSG(error.empty(), "SentencePiece encode failed: " + error);
  out->insert(out->end(), ids.begin(), ids.end());
}

void SentencePieceTokenizer::encode(absl::string_view text, std::vector<int32_t>* out) const {
  std::string storage;
  const absl::string_view valid = utf8::replace_invalid(text, &storage);
  if (extra_ids_ == 0) {
    encode_plain(valid, out);
    return;
  }
  size_t begin = 0;  // start of the text not yet encoded
  size_t pos = 0;
  while ((pos = valid.find(kSentinelPrefix, pos)) != absl::string_view::npos) {
    size_t length = 0;
    const int64_t k = parse_sentinel(valid, pos, &length);
    if (k < 0 || k >= extra_ids_) {
      pos += 1;
      continue;
    }
    encode_plain(valid.substr(begin, pos - begin), out);
    out->push_back(special_.sentinels[k]);
    pos += length;
    begin = pos;
  }
  encode_plain(valid.substr(begin), out);
}

absl::StatusOr<std::string> SentencePieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string text;
  std::vector<int> run;
  auto flush = [&]() -> absl::Status {
    if (run.empty()) return absl::OkStatus();
    std::string piece_text;
    const std::string error = processor_.decode(run, &piece_text);
    if (!error.empty()) return absl::InternalError("SentencePiece decode failed: " + error);
    text += piece_text;
    run.clear();
    return absl::OkStatus();
  };
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("SentencePiece: token id %d at position %d is outside the vocabulary "
                          "[0, %d)",
                          id, i, vocab_size()));
    }
    if (id < pieces_) {
      run.push_back(id);
      continue;
    }
    ANVIL_RETURN_IF_ERROR(flush());
    text += piece(id);
  }
  ANVIL_RETURN_IF_ERROR(flush());
  return text;
}

std::string SentencePieceTokenizer::piece(int32_t id) const {
  if (id < 0 || id >= vocab_size()) return {};
  if (id < pieces_) return processor_.id_to_piece(id);
  return absl::StrCat("<extra_id_", pieces_ + extra_ids_ - 1 - id, ">");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(
    const TokenizerOptions& options) {
  auto tok = SentencePieceTokenizer::load(options.vocab_file, options.vocab_extra_ids);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

}  // namespace anvil::io
