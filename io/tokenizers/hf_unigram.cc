// tokenizers' Unigram model (models/unigram/model.rs, encode_optimized) for tokenizer.json
// (io/tokenizers/hf_models.h).
//
// Viterbi over byte positions: from each character boundary, every vocabulary piece that
// prefixes the rest (shortest first) extends the best path ending there by its score; a
// position where no piece covers exactly one character also gets an unk edge of score
// min_score - 10 over that character. Ties keep the first candidate. The best path is read
// backwards; adjacent unk pieces are fused into one. Each resulting string is its id, or its
// <0xXX> byte tokens under byte_fallback, or the unk id.
#include <algorithm>
#include <cstdio>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/tokenizers/hf_models.h"
#include "io/tokenizers/hf_utf8.h"
#include "io/tokenizers/hf_word_cache.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

constexpr double kUnkPenalty = 10.0;

class Unigram final : public Model {
 public:
  Unigram(std::vector<std::string> tokens, VocabMap ids, std::vector<double> scores,
          std::optional<int32_t> unk_id, bool byte_fallback)
      : scores_(std::move(scores)),
        unk_id_(unk_id),
        byte_fallback_(byte_fallback),
        serial_(new_cache_serial()) {
    tokens_ = std::move(tokens);
    ids_ = std::move(ids);
    if (unk_id_) unk_token_ = tokens_[*unk_id_];
    min_score_ = scores_.empty() ? 0.0 : *std::min_element(scores_.begin(), scores_.end());
    for (const std::string& t : tokens_) max_piece_bytes_ = std::max(max_piece_bytes_, t.size());
  }

  void tokenize(absl::string_view piece, std::vector<int32_t>* out) const override {
    cached_ids(serial_, piece, out,
               [this](absl::string_view p, std::vector<int32_t>* ids) { encode(p, ids); });
  }

 private:
  struct Node {
    double score = 0;
    int64_t start = -1;  // -1: not reached
    int32_t id = -1;
  };

  void encode(absl::string_view piece, std::vector<int32_t>* out) const {
    std::vector<absl::string_view> strings;
    viterbi(piece, &strings);
    for (const absl::string_view s : strings) {
      const int32_t id = token_to_id(s);
      if (id >= 0) {
        out->push_back(id);
        continue;
      }
      if (byte_fallback_ && append_bytes(s, out)) continue;
      if (unk_id_) out->push_back(*unk_id_);
    }
  }

  bool append_bytes(absl::string_view s, std::vector<int32_t>* out) const {
    std::vector<int32_t> ids;
    char name[8];
    for (const char c : s) {
      std::snprintf(name, sizeof(name), "<0x%02X>", static_cast<unsigned char>(c));
      const int32_t id = token_to_id(name);
      if (id < 0) return false;
      ids.push_back(id);
    }
    out->insert(out->end(), ids.begin(), ids.end());
    return true;
  }

  void relax(std::vector<Node>* best, size_t from, size_t to, double score, int32_t id) const {
    Node& target = (*best)[to];
    const double candidate = score + (*best)[from].score;
    if (target.start < 0 || candidate > target.score) {
      target.score = candidate;
      target.start = static_cast<int64_t>(from);
      target.id = id;
    }
  }

  void viterbi(absl::string_view text, std::vector<absl::string_view>* out) const {
    const size_t n = text.size();
    std::vector<Node> best(n + 1);
    const double unk_score = min_score_ - kUnkPenalty;
    for (size_t start = 0; start < n;) {
      const size_t char_len = static_cast<size_t>(decode_utf8(text, start).length);
      bool single = false;
      const size_t limit = std::min(max_piece_bytes_, n - start);
      for (size_t len = 1; len <= limit; ++len) {
        const int32_t id = token_to_id(text.substr(start, len));
        if (id < 0) continue;
        relax(&best, start, start + len, scores_[id], id);
        if (len == char_len) single = true;
      }
      if (!single) relax(&best, start, start + char_len, unk_score, unk_id_.value_or(-1));
      start += char_len;
    }
    // Backwards, fusing consecutive unknowns.
    std::vector<absl::string_view> reversed;
    size_t end = n;
    size_t unk_end = 0;
    bool in_unk = false;
    while (end > 0) {
      const Node& node = best[end];
      const size_t start = static_cast<size_t>(node.start);
      const bool is_unk = unk_id_ && node.id == *unk_id_;
      if (is_unk) {
        if (!in_unk) unk_end = end;
        in_unk = true;
      } else {
        if (in_unk) reversed.push_back(text.substr(end, unk_end - end));
        in_unk = false;
        reversed.push_back(text.substr(start, end - start));
      }
      end = start;
    }
    if (in_unk) reversed.push_back(text.substr(0, unk_end));
    out->assign(reversed.rbegin(), reversed.rend());
  }

  std::vector<double> scores_;
  std::optional<int32_t> unk_id_;
  bool byte_fallback_;
  double min_score_ = 0;
  size_t max_piece_bytes_ = 0;
  uint64_t serial_;
};

}  // namespace

absl::Status parse_unigram(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out) {
  const auto v = m.find("vocab");
  if (v == m.end() || !v->is_array() || v->empty()) {
    return ctx.bad("model.vocab", "must be a non-empty list of [piece, score]");
  }
  std::vector<std::string> tokens;
  std::vector<double> scores;
  VocabMap ids;
  tokens.reserve(v->size());
  scores.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_array() || e.size() != 2 || !e[0].is_string() || !e[1].is_number()) {
      return ctx.bad(absl::StrCat("model.vocab[", i, "]"), "must be [piece, score]");
    }
    tokens.push_back(e[0].get<std::string>());
    scores.push_back(e[1].get<double>());
    ids[tokens.back()] = static_cast<int32_t>(i);  // the last of duplicates wins (a HashMap)
  }
  std::optional<int32_t> unk;
  if (const auto u = m.find("unk_id"); u != m.end() && !u->is_null()) {
    int32_t id = 0;
    ANVIL_RETURN_IF_ERROR(get_id(ctx, *u, "model.unk_id", &id));
    if (static_cast<size_t>(id) >= tokens.size()) {
      return ctx.bad("model.unk_id", "is outside the vocabulary");
    }
    unk = id;
  }
  bool byte_fallback = false;
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, m, "byte_fallback", "model", false, &byte_fallback));
  *out = std::make_unique<Unigram>(std::move(tokens), std::move(ids), std::move(scores), unk,
                                   byte_fallback);
  return absl::OkStatus();
}

}  // namespace anvil::io::hf_internal
