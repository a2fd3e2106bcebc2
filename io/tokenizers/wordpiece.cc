// WordPiece model (greedy longest-match-first) and Megatron's BERT WordPiece tokenizers; see
// wordpiece.h for the rules and where they come from.
#include "io/tokenizers/wordpiece.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "io/tokenizers/factories.h"

namespace anvil::io {
namespace {

// Longest word encode_word segments: longer words are [UNK] before any lookup, so the char
// boundaries of a word fit a fixed array for any sane limit.
constexpr int kMaxCharsLimit = 1024;

bool is_ascii_space(char c) {
  return c == ' ' || (c >= '\t' && c <= '\r') || (c >= 0x1C && c <= 0x1F);
}

}  // namespace

namespace {

// 64-bit hash of a short string: 8 bytes at a time through a multiply-xorshift mix.
uint64_t hash_bytes(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = 0xCBF29CE484222325ull ^ (s.size() * kMul);
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  h *= kMul;
  return h ^ (h >> 32);
}

}  // namespace

void TokenTable::grow() {
  std::vector<Slot> old = std::move(slots_);
  slots_.assign(old.empty() ? 64 : old.size() * 2, Slot{0, 0, 0, -1});
  const size_t mask = slots_.size() - 1;
  for (const Slot& s : old) {
    if (s.id < 0) continue;
    size_t i = s.hash & mask;
    while (slots_[i].id >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

void TokenTable::add(std::string_view key, int32_t id) {
  if ((size_ + 1) * 2 > slots_.size()) grow();
  const uint64_t h = hash_bytes(key);
  const size_t mask = slots_.size() - 1;
  size_t i = h & mask;
  for (; slots_[i].id >= 0; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.hash == h && s.length == key.size() &&
        std::memcmp(keys_.data() + s.offset, key.data(), key.size()) == 0) {
      slots_[i].id = id;  // the last one wins
      return;
    }
  }
  slots_[i] = Slot{h, static_cast<uint32_t>(keys_.size()), static_cast<uint32_t>(key.size()), id};
  keys_.append(key.data(), key.size());
  ++size_;
  max_key_bytes_ = std::max(max_key_bytes_, key.size());
}

int32_t TokenTable::find(std::string_view key) const {
  if (slots_.empty() || key.size() > max_key_bytes_) return -1;
  const uint64_t h = hash_bytes(key);
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const Slot& s = slots_[i];
    if (s.id < 0) return -1;
    if (s.hash == h && s.length == key.size() &&
        std::memcmp(keys_.data() + s.offset, key.data(), key.size()) == 0) {
      return s.id;
    }
  }
}

WordPieceModel::WordPieceModel(std::vector<std::string> tokens, int32_t unk,
                               std::string continuing_prefix, int max_input_chars_per_word)
    : tokens_(std::move(tokens)),
      unk_(unk),
      prefix_(std::move(continuing_prefix)),
      max_chars_(std::min(max_input_chars_per_word, kMaxCharsLimit)) {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& t = tokens_[i];
    ids_.add(t, static_cast<int32_t>(i));
    // Continuations are looked up by what follows the prefix, so encode_word never copies.
    if (t.size() > prefix_.size() && t.compare(0, prefix_.size(), prefix_) == 0) {
      continuation_.add(std::string_view(t).substr(prefix_.size()), static_cast<int32_t>(i));
    }
  }
}

int32_t WordPieceModel::find(std::string_view token) const { return ids_.find(token); }

void WordPieceModel::encode_word(absl::string_view word, std::vector<int32_t>* out) const {
  // Code point boundaries of the word: bounds[k] = byte offset of character k.
  std::array<uint32_t, kMaxCharsLimit + 1> bounds;
  int chars = 0;
  for (size_t i = 0; i < word.size(); ++i) {
    if ((static_cast<unsigned char>(word[i]) & 0xC0) == 0x80) continue;  // continuation byte
    if (chars == max_chars_) {
      out->push_back(unk_);  // more than max_chars_ characters
      return;
    }
    bounds[chars++] = static_cast<uint32_t>(i);
  }
  if (chars == 0) return;
  bounds[chars] = static_cast<uint32_t>(word.size());

  const std::string_view w(word.data(), word.size());
  const size_t first = out->size();
  int start = 0;
  while (start < chars) {
    const TokenTable& table = start == 0 ? ids_ : continuation_;
    // Skip candidates longer than any key.
    int end = chars;
    while (end > start && bounds[end] - bounds[start] > table.max_key_bytes()) --end;
    int32_t found = -1;
    for (; end > start; --end) {
      found = table.find(w.substr(bounds[start], bounds[end] - bounds[start]));
      if (found >= 0) break;
    }
    if (found < 0) {  // no segmentation: the whole word is unknown
      out->resize(first);
      out->push_back(unk_);
      return;
    }
    out->push_back(found);
    start = end;
  }
}

absl::StatusOr<std::vector<std::string>> read_wordpiece_vocab(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return absl::NotFoundError(absl::StrCat("WordPiece vocab file '", path, "': cannot open"));
  const std::string data((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad())
    return absl::NotFoundError(absl::StrCat("WordPiece vocab file '", path, "': read error"));
  std::vector<std::string> tokens;
  size_t pos = 0;
  while (pos < data.size()) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    size_t b = pos, e = end;
    while (b < e && is_ascii_space(data[b])) ++b;
    while (e > b && is_ascii_space(data[e - 1])) --e;
    tokens.emplace_back(data, b, e - b);
    pos = end + 1;
  }
  if (tokens.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("WordPiece vocab file '", path, "' is empty"));
  }
  return tokens;
}

BertWordPieceTokenizer::BertWordPieceTokenizer(std::unique_ptr<WordPieceModel> model,
                                               std::vector<std::string> added,
                                               const WordPieceOptions& options)
    : model_(std::move(model)), lower_case_(options.lower_case) {
  all_tokens_ = model_->tokens();
  for (std::string& t : added) all_tokens_.push_back(std::move(t));
  normalizer_.lowercase = options.lower_case;
  normalizer_.strip_accents = options.lower_case;
  normalizer_.rules = BertNormalizerOptions::Rules::kPython;
}

absl::StatusOr<std::unique_ptr<BertWordPieceTokenizer>> BertWordPieceTokenizer::load(
    const WordPieceOptions& options) {
  auto tokens_or = read_wordpiece_vocab(options.vocab_file);
  if (!tokens_or.ok()) return tokens_or.status();
  std::vector<std::string> tokens = std::move(tokens_or).value();
  if (tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return absl::InvalidArgumentError(
        absl::StrCat("WordPiece vocab file '", options.vocab_file, "' has too many lines"));
  }
  if (options.vocab_extra_ids < 0 || options.max_input_chars_per_word < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "WordPiece: vocab_extra_ids (%d) must be >= 0 and max_input_chars_per_word (%d) >= 1",
        options.vocab_extra_ids, options.max_input_chars_per_word));
  }
  // Position of each token; the last occurrence wins, as in Megatron's vocab dict.
  std::unordered_map<std::string, int32_t> index;
  for (size_t i = 0; i < tokens.size(); ++i) index[tokens[i]] = static_cast<int32_t>(i);
  SpecialTokens special;
  struct Required {
    const char* token;
    int32_t* id;
  };
  for (const Required& r : {Required{"[PAD]", &special.pad}, Required{"[UNK]", &special.unk},
                            Required{"[CLS]", &special.cls}, Required{"[SEP]", &special.sep},
                            Required{"[MASK]", &special.mask}}) {
    const auto it = index.find(r.token);
    if (it == index.end()) {
      return absl::InvalidArgumentError(absl::StrCat("WordPiece vocab file '", options.vocab_file,
                                                     "' has no ", r.token, " token"));
    }
    *r.id = it->second;
  }
  // Megatron's add_token: appended after the vocabulary unless present.
  std::vector<std::string> added;
  int32_t next_id = static_cast<int32_t>(tokens.size());
  auto add_token = [&](const std::string& t) {
    const auto it = index.find(t);
    if (it != index.end()) return it->second;
    index[t] = next_id;
    added.push_back(t);
    return next_id++;
  };
  special.bos = add_token("[BOS]");
  special.eos = add_token("[EOS]");
  for (int k = 0; k < options.vocab_extra_ids; ++k) {
    special.sentinels.push_back(add_token(absl::StrCat("<extra_id_", k, ">")));
  }
  auto model = std::make_unique<WordPieceModel>(std::move(tokens), special.unk, "##",
                                                options.max_input_chars_per_word);
  std::unique_ptr<BertWordPieceTokenizer> tok(
      new BertWordPieceTokenizer(std::move(model), std::move(added), options));
  tok->special_ = std::move(special);
  return tok;
}

std::string BertWordPieceTokenizer::name() const {
  return lower_case_ ? "BertWordPieceLowerCase" : "BertWordPieceCase";
}

std::string_view BertWordPieceTokenizer::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= all_tokens_.size()) return {};
  return all_tokens_[id];
}

void BertWordPieceTokenizer::encode(absl::string_view text, std::vector<int32_t>* out) const {
  std::string normalized;
  bert_normalize(text, normalizer_, &normalized);
  std::vector<std::pair<size_t, size_t>> words;
  bert_pre_tokenize(normalized, &words);
  const absl::string_view view(normalized);
  for (const auto& [b, e] : words) model_->encode_word(view.substr(b, e - b), out);
}

absl::StatusOr<std::string> BertWordPieceTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string joined;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || static_cast<size_t>(ids[i]) >= all_tokens_.size()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: token id %d at position %d is outside the vocabulary [0, %d)",
                          name(), ids[i], i, all_tokens_.size()));
    }
    if (i > 0) joined.push_back(' ');
    joined += all_tokens_[ids[i]];
  }
  std::string text = absl::StrReplaceAll(joined, {{" ##", ""}});
  // Python's str.strip() (ASCII whitespace suffices: tokens hold none but at their ends).
  size_t b = 0, e = text.size();
  while (b < e && is_ascii_space(text[b])) ++b;
  while (e > b && is_ascii_space(text[e - 1])) --e;
  return text.substr(b, e - b);
}

absl::StatusOr<std::unique_ptr<Tokenizer>> make_wordpiece_tokenizer(const TokenizerOptions& options,
                                                                    bool lower_case) {
  WordPieceOptions wp;
  wp.vocab_file = options.vocab_file;
  wp.lower_case = lower_case;
  wp.vocab_extra_ids = options.vocab_extra_ids;
  auto tok = BertWordPieceTokenizer::load(wp);
  if (!tok.ok()) return tok.status();
  return std::unique_ptr<Tokenizer>(std::move(tok).value());
}

}  // namespace anvil::io
