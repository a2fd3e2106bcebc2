// tokenizers' BPE model (models/bpe/model.rs) for tokenizer.json (io/tokenizers/hf_models.h).
//
// A piece becomes one symbol per code point (the continuing_subword_prefix before every one but
// the first, the end_of_word_suffix after the last), each its vocabulary id; a code point
// missing from the vocabulary becomes its bytes' <0xXX> tokens under byte_fallback (when all
// exist), else the unk token (consecutive unknowns fused into one under fuse_unk), else nothing.
// Then the pair with the lowest merge rank, leftmost on ties, is merged until none is left
// (a heap, as Word::merge_all). ignore_merges: a piece that is itself a token is that token.
// Results of pieces up to kMaxCachedBytes are memoized per thread.
//
// SentencePiece-style vocabularies (Llama 2, Mistral, Gemma) see whole sentences as one piece.
// Such a piece is cut before each '▁' (U+2581) that follows another character X when no merge
// joins a left part ending in X to a right part starting with '▁': the first merge to span that
// boundary would have to be such a merge, so the cut changes nothing, and the words it yields
// hit the cache.
#include <algorithm>
#include <cstdio>
#include <queue>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/tokenizers/hf_models.h"
#include "io/tokenizers/hf_utf8.h"
#include "io/tokenizers/hf_word_cache.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

uint64_t pair_key(int32_t a, int32_t b) {
  return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b);
}

class Bpe final : public Model {
 public:
  struct Options {
    int32_t unk = -1;  // the unk token's id, or -1 for none
    bool fuse_unk = false;
    bool byte_fallback = false;
    bool ignore_merges = false;
    std::string prefix;
    std::string suffix;
  };

  Bpe(std::vector<std::string> tokens, VocabMap ids, std::optional<std::string> unk_token,
      absl::flat_hash_map<uint64_t, std::pair<uint32_t, int32_t>> merges, Options options)
      : merges_(std::move(merges)), o_(std::move(options)), serial_(new_cache_serial()) {
    tokens_ = std::move(tokens);
    ids_ = std::move(ids);
    unk_token_ = std::move(unk_token);
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = token_to_id(name);
    }
    find_metaspace_cuts();
  }

  void tokenize(absl::string_view piece, std::vector<int32_t>* out) const override {
    if (piece.empty()) return;
    if (o_.ignore_merges) {
      const int32_t id = token_to_id(piece);
      if (id >= 0) {
        out->push_back(id);
        return;
      }
    }
    if (!split_metaspace_) {
      tokenize_word(piece, out);
      return;
    }
    size_t begin = 0;
    char32_t prev = 0;
    for (size_t pos = 0; pos < piece.size();) {
      const utf8::Decoded d = decode_utf8(piece, pos);
      if (d.cp == kMetaspace && pos > begin && prev != kMetaspace &&
          !no_cut_after_.contains(prev)) {
        tokenize_word(piece.substr(begin, pos - begin), out);
        begin = pos;
      }
      prev = d.cp;
      pos += d.length;
    }
    tokenize_word(piece.substr(begin), out);
  }

 private:
  static constexpr char32_t kMetaspace = 0x2581;

  // Decides split_metaspace_ and no_cut_after_ (see the file comment).
  void find_metaspace_cuts() {
    if (!o_.prefix.empty() || !o_.suffix.empty()) return;
    const int32_t meta = token_to_id("\u2581");
    if (meta < 0) return;
    for (const auto& [pair, merge] : merges_) {
      const std::string& left = tokens_[static_cast<uint32_t>(pair >> 32)];
      const std::string& right = tokens_[static_cast<uint32_t>(pair & 0xFFFFFFFFu)];
      if (left.empty() || right.empty()) continue;
      if (decode_utf8(right, 0).cp != kMetaspace) continue;
      size_t last = left.size() - 1;
      while (last > 0 && (static_cast<unsigned char>(left[last]) & 0xC0) == 0x80) --last;
      no_cut_after_.insert(decode_utf8(left, last).cp);
    }
    split_metaspace_ = true;
  }

  // The merges of one word, through the per-thread cache.
  void tokenize_word(absl::string_view piece, std::vector<int32_t>* out) const {
    cached_ids(serial_, piece, out,
               [this](absl::string_view p, std::vector<int32_t>* ids) { merge_word(p, ids); });
  }

  struct Symbol {
    int32_t id;
    int prev;
    int next;
    bool removed;
  };
  struct Merge {
    uint32_t rank;
    int pos;
    int32_t new_id;
    bool operator<(const Merge& o) const {  // std::priority_queue pops the largest
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };

  const std::pair<uint32_t, int32_t>* find_merge(int32_t a, int32_t b) const {
    const auto it = merges_.find(pair_key(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  }

  // Word::add
  static void add(std::vector<Symbol>* w, int32_t id) {
    const int n = static_cast<int>(w->size());
    if (n > 0) (*w)[n - 1].next = n;
    w->push_back({id, n - 1, -1, false});
  }

  // BPE::merge_word: the initial symbols of `piece`.
  void initial_symbols(absl::string_view piece, std::vector<Symbol>* w) const {
    int32_t unk = -1;  // a pending (possibly fused) unknown, or -1
    std::string s;
    for (size_t pos = 0; pos < piece.size();) {
      const utf8::Decoded d = decode_utf8(piece, pos);
      const bool first = pos == 0;
      const bool last = pos + d.length == piece.size();
      s.clear();
      if (!first) s += o_.prefix;
      s.append(piece.data() + pos, d.length);
      if (last) s += o_.suffix;
      pos += d.length;
      const int32_t id = token_to_id(s);
      if (id >= 0) {
        if (unk >= 0) add(w, unk);
        unk = -1;
        add(w, id);
        continue;
      }
      if (o_.byte_fallback && bytes_known(s)) {
        for (const char c : s) add(w, byte_ids_[static_cast<unsigned char>(c)]);
        continue;
      }
      if (o_.unk >= 0) {
        if (unk >= 0 && !o_.fuse_unk) add(w, unk);
        unk = o_.unk;
      }
    }
    if (unk >= 0) add(w, unk);
  }

  bool bytes_known(absl::string_view s) const {
    for (const char c : s) {
      if (byte_ids_[static_cast<unsigned char>(c)] < 0) return false;
    }
    return true;
  }

  // Word::merge_all, then the surviving ids appended to *out.
  void merge_word(absl::string_view piece, std::vector<int32_t>* out) const {
    std::vector<Symbol> w;
    w.reserve(piece.size());
    initial_symbols(piece, &w);
    std::priority_queue<Merge> queue;
    for (size_t i = 0; i + 1 < w.size(); ++i) {
      if (const auto* m = find_merge(w[i].id, w[i + 1].id)) {
        queue.push({m->first, static_cast<int>(i), m->second});
      }
    }
    while (!queue.empty()) {
      const Merge top = queue.top();
      queue.pop();
      Symbol& cur = w[top.pos];
      if (cur.removed || cur.next == -1) continue;
      const int next_pos = cur.next;
      const Symbol right = w[next_pos];
      const auto* m = find_merge(cur.id, right.id);
      if (m == nullptr || m->second != top.new_id) continue;  // an outdated entry
      cur.id = top.new_id;
      cur.next = right.next;
      w[next_pos].removed = true;
      if (right.next >= 0) w[right.next].prev = top.pos;
      if (cur.prev >= 0) {
        if (const auto* pm = find_merge(w[cur.prev].id, cur.id)) {
          queue.push({pm->first, cur.prev, pm->second});
        }
      }
      if (cur.next >= 0) {
        if (const auto* nm = find_merge(cur.id, w[cur.next].id)) {
          queue.push({nm->first, top.pos, nm->second});
        }
      }
    }
    for (const Symbol& s : w) {
      if (!s.removed) out->push_back(s.id);
    }
  }

  absl::flat_hash_map<uint64_t, std::pair<uint32_t, int32_t>> merges_;
  Options o_;
  int32_t byte_ids_[256];
  uint64_t serial_;
  bool split_metaspace_ = false;
  absl::flat_hash_set<char32_t> no_cut_after_;
};

// One merge: "a b" (older files) or ["a", "b"].
absl::Status merge_parts(const Ctx& ctx, const json& e, size_t i, std::string* a, std::string* b) {
  if (e.is_string()) {
    const std::string s = e.get<std::string>();
    const size_t space = s.find(' ');
    if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
      return ctx.bad(absl::StrCat("model.merges[", i, "]"), "must be \"a b\" (one space)");
    }
    *a = s.substr(0, space);
    *b = s.substr(space + 1);
    return absl::OkStatus();
  }
  if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {
    *a = e[0].get<std::string>();
    *b = e[1].get<std::string>();
    return absl::OkStatus();
  }
  return ctx.bad(absl::StrCat("model.merges[", i, "]"), "must be \"a b\" or [\"a\", \"b\"]");
}

}  // namespace

absl::Status parse_bpe(const Ctx& ctx, const json& m, std::unique_ptr<Model>* out) {
  std::vector<std::string> tokens;
  VocabMap ids;
  ANVIL_RETURN_IF_ERROR(read_vocab_object(ctx, m, &tokens, &ids));
  if (const auto it = m.find("dropout"); it != m.end() && !it->is_null()) {
    if (!it->is_number() || it->get<double>() != 0.0) {
      return ctx.unsupported("model", "BPE with dropout", "dropout must be null or 0");
    }
  }
  Bpe::Options o;
  std::optional<std::string> unk, prefix, suffix;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "unk_token", "model", &unk));
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "continuing_subword_prefix", "model", &prefix));
  ANVIL_RETURN_IF_ERROR(get_string(ctx, m, "end_of_word_suffix", "model", &suffix));
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, m, "fuse_unk", "model", false, &o.fuse_unk));
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, m, "byte_fallback", "model", false, &o.byte_fallback));
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, m, "ignore_merges", "model", false, &o.ignore_merges));
  o.prefix = prefix.value_or("");
  o.suffix = suffix.value_or("");
  if (unk) {
    const auto u = ids.find(*unk);
    // tokenizers fails at encode time on a missing unk; anvil says so at load time.
    if (u == ids.end()) {
      return ctx.bad("model.unk_token", absl::StrCat("\"", *unk, "\" is not in the vocabulary"));
    }
    o.unk = u->second;
  }
  const auto mg = m.find("merges");
  if (mg == m.end() || !mg->is_array()) return ctx.bad("model.merges", "must be a list");
  absl::flat_hash_map<uint64_t, std::pair<uint32_t, int32_t>> merges;
  merges.reserve(mg->size());
  std::string a, b;
  for (size_t i = 0; i < mg->size(); ++i) {
    ANVIL_RETURN_IF_ERROR(merge_parts(ctx, (*mg)[i], i, &a, &b));
    const auto ia = ids.find(a), ib = ids.find(b);
    // The merged token drops the prefix length from the second part (tokenizers).
    const std::string rest = b.substr(std::min(o.prefix.size(), b.size()));
    const auto im = ids.find(a + rest);
    if (ia == ids.end() || ib == ids.end() || im == ids.end()) {
      return ctx.bad(
          absl::StrCat("model.merges[", i, "]"),
          absl::StrCat("\"", a, " ", b, "\" has a part or result outside the vocabulary"));
    }
    merges[pair_key(ia->second, ib->second)] = {static_cast<uint32_t>(i), im->second};
  }
  *out = std::make_unique<Bpe>(std::move(tokens), std::move(ids), unk, std::move(merges),
                               std::move(o));
  return absl::OkStatus();
}

}  // namespace anvil::io::hf_internal
