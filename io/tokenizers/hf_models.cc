// The model dispatch of tokenizer.json, and its WordPiece and WordLevel models
// (io/tokenizers/hf_models.h).
#include "io/tokenizers/hf_models.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/tokenizers/wordpiece.h"

namespace anvil::io::hf_internal {
namespace {

class WordPiece final : public Model {
 public:
  WordPiece(std::vector<std::string> tokens, VocabMap ids, std::optional<std::string> unk,
            int32_t unk_id, std::string prefix, int max_chars)
      : model_(tokens, unk_id, std::move(prefix), max_chars) {
    tokens_ = std::move(tokens);
    ids_ = std::move(ids);
    unk_token_ = std::move(unk);
  }
  void tokenize(absl::string_view piece, std::vector<int32_t>* out) const override {
    model_.encode_word(piece, out);
  }

 private:
  WordPieceModel model_;
};

class WordLevel final : public Model {
 public:
  WordLevel(std::vector<std::string> tokens, VocabMap ids, std::string unk, int32_t unk_id)
      : unk_id_(unk_id) {
    tokens_ = std::move(tokens);
    ids_ = std::move(ids);
    unk_token_ = std::move(unk);
  }
  void tokenize(absl::string_view piece, std::vector<int32_t>* out) const override {
    const int32_t id = token_to_id(piece);
    out->push_back(id >= 0 ? id : unk_id_);
  }

 private:
  int32_t unk_id_;
};

absl::Status parse_wordpiece(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out) {
  std::vector<std::string> tokens;
  VocabMap ids;
  ANVIL_RETURN_IF_ERROR(read_vocab_object(ctx, m, &tokens, &ids));
  std::optional<std::string> unk, prefix;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "unk_token", "model", &unk));
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "continuing_subword_prefix", "model", &prefix));
  uint64_t max_chars = 100;
  ANVIL_RETURN_IF_ERROR(get_uint(ctx, m, "max_input_chars_per_word", "model", 100, &max_chars));
  if (max_chars < 1) return ctx.bad("model.max_input_chars_per_word", "must be positive");
  const std::string unk_name = unk.value_or("[UNK]");
  const auto u = ids.find(unk_name);
  if (u == ids.end()) {
    return ctx.bad("model.unk_token", absl::StrCat("\"", unk_name, "\" is not in the vocabulary"));
  }
  const int32_t unk_id = u->second;
  *out = std::make_unique<WordPiece>(std::move(tokens), std::move(ids), unk_name, unk_id,
                                     prefix.value_or("##"),
                                     static_cast<int>(std::min<uint64_t>(max_chars, INT32_MAX)));
  return absl::OkStatus();
}

absl::Status parse_wordlevel(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out) {
  std::vector<std::string> tokens;
  VocabMap ids;
  ANVIL_RETURN_IF_ERROR(read_vocab_object(ctx, m, &tokens, &ids));
  std::optional<std::string> unk;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "unk_token", "model", &unk));
  const std::string unk_name = unk.value_or("<unk>");
  const auto u = ids.find(unk_name);
  if (u == ids.end()) {
    return ctx.bad("model.unk_token", absl::StrCat("\"", unk_name, "\" is not in the vocabulary"));
  }
  const int32_t unk_id = u->second;
  *out = std::make_unique<WordLevel>(std::move(tokens), std::move(ids), unk_name, unk_id);
  return absl::OkStatus();
}

}  // namespace

absl::Status read_vocab_object(const Ctx& ctx, const json& m, std::vector<std::string>* tokens,
                               VocabMap* ids) {
  const auto v = m.find("vocab");
  if (v == m.end() || !v->is_object()) return ctx.bad("model.vocab", "must be an object");
  int32_t max_id = -1;
  for (auto it = v->begin(); it != v->end(); ++it) {
    int32_t id = 0;
    ANVIL_RETURN_IF_ERROR(
        get_id(ctx, it.value(), absl::StrCat("model.vocab[\"", it.key(), "\"]"), &id));
    max_id = std::max(max_id, id);
  }
  if (max_id < 0) return ctx.bad("model.vocab", "is empty");
  tokens->assign(static_cast<size_t>(max_id) + 1, std::string());
  std::vector<bool> seen(static_cast<size_t>(max_id) + 1, false);
  ids->reserve(v->size());
  for (auto it = v->begin(); it != v->end(); ++it) {
    const int32_t id = static_cast<int32_t>(it.value().get<int64_t>());
    if (seen[id]) {
      return ctx.bad(absl::StrCat("model.vocab[\"", it.key(), "\"]"),
                     absl::StrCat("reuses id ", id));
    }
    seen[id] = true;
    (*tokens)[id] = it.key();
    (*ids)[it.key()] = id;
  }
  return absl::OkStatus();
}

absl::Status parse_model(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out) {
  if (!m.is_object()) return ctx.bad("model", "must be an object");
  std::optional<std::string> type;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "type", "model", &type));
  // Files written before tokenizers 0.9 have no type: BPE has merges, WordPiece a prefix,
  // Unigram a vocab list.
  if (!type) {
    if (m.contains("merges")) {
      type = "BPE";
    } else if (m.contains("continuing_subword_prefix")) {
      type = "WordPiece";
    } else if (m.contains("vocab") && m["vocab"].is_array()) {
      type = "Unigram";
    } else {
      type = "WordLevel";
    }
  }
  if (*type == "BPE") return parse_bpe(ctx, m, out);
  if (*type == "Unigram") return parse_unigram(ctx, m, out);
  if (*type == "WordPiece") return parse_wordpiece(ctx, m, out);
  if (*type == "WordLevel") return parse_wordlevel(ctx, m, out);
  return ctx.unsupported("model", *type, "supported: BPE, Unigram, WordPiece, WordLevel");
}

}  // namespace anvil::io::hf_internal
