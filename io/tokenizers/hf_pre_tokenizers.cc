// Pre-tokenizers of tokenizer.json (io/tokenizers/hf_pre_tokenizers.h).
#include "io/tokenizers/hf_pre_tokenizers.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/tokenizers/bert_normalizer.h"
#include "io/tokenizers/gpt2_bpe.h"
#include "io/tokenizers/hf_byte_level.h"
#include "io/tokenizers/hf_fast_splits.h"
#include "io/tokenizers/hf_pattern.h"
#include "io/tokenizers/hf_utf8.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };

absl::Status get_behavior(const Ctx& ctx, const json& obj, const std::string& where,
                          Behavior fallback, Behavior* out) {
  std::optional<std::string> b;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, obj, "behavior", where, &b));
  *out = fallback;
  if (!b) return absl::OkStatus();
  if (*b == "Removed") {
    *out = Behavior::kRemoved;
  } else if (*b == "Isolated") {
    *out = Behavior::kIsolated;
  } else if (*b == "MergedWithPrevious") {
    *out = Behavior::kMergedWithPrevious;
  } else if (*b == "MergedWithNext") {
    *out = Behavior::kMergedWithNext;
  } else if (*b == "Contiguous") {
    *out = Behavior::kContiguous;
  } else {
    return ctx.bad(where + ".behavior",
                   "must be Removed, Isolated, MergedWithPrevious, MergedWithNext or Contiguous");
  }
  return absl::OkStatus();
}

struct Span {
  size_t begin, end;
  bool remove;
};

// tokenizers' NormalizedString::split: the tiling `m` of one piece regrouped by `behavior`;
// the non-empty, kept spans are appended to *out as pieces.
void split_by(const Piece& piece, const std::vector<PatternMatch>& m, Behavior behavior,
              std::vector<Piece>* out) {
  std::vector<Span> spans;
  spans.reserve(m.size());
  switch (behavior) {
    case Behavior::kIsolated:
      for (const PatternMatch& x : m) spans.push_back({x.begin, x.end, false});
      break;
    case Behavior::kRemoved:
      for (const PatternMatch& x : m) spans.push_back({x.begin, x.end, x.is_match});
      break;
    case Behavior::kContiguous: {
      bool previous = false;
      for (const PatternMatch& x : m) {
        if (x.is_match == previous && !spans.empty()) {
          spans.back().end = x.end;
        } else {
          spans.push_back({x.begin, x.end, false});
        }
        previous = x.is_match;
      }
      break;
    }
    case Behavior::kMergedWithPrevious: {
      bool previous = false;
      for (const PatternMatch& x : m) {
        if (x.is_match && !previous && !spans.empty()) {
          spans.back().end = x.end;
        } else {
          spans.push_back({x.begin, x.end, false});
        }
        previous = x.is_match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous = false;
      for (size_t i = m.size(); i-- > 0;) {
        const PatternMatch& x = m[i];
        if (x.is_match && !previous && !spans.empty()) {
          spans.back().begin = x.begin;
        } else {
          spans.push_back({x.begin, x.end, false});
        }
        previous = x.is_match;
      }
      std::reverse(spans.begin(), spans.end());
      break;
    }
  }
  for (const Span& s : spans) {
    if (s.remove || s.begin == s.end) continue;
    out->push_back({piece.text.substr(s.begin, s.end - s.begin), piece.first && s.begin == 0});
  }
}

// tokenizers' Pattern for a char predicate: each matching code point is a match of its own.
template <typename Pred>
void char_matches(absl::string_view text, Pred pred, std::vector<PatternMatch>* out) {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return;
  }
  size_t last = 0;
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Decoded d = decode_utf8(text, pos);
    if (pred(d.cp)) {
      if (last < pos) out->push_back({last, pos, false});
      out->push_back({pos, pos + d.length, true});
      last = pos + d.length;
    }
    pos += d.length;
  }
  if (last < text.size()) out->push_back({last, text.size(), false});
}

// Applies `tile(text, &matches)` + split_by to every piece.
template <typename Tile>
void split_pieces(std::vector<Piece>* pieces, Behavior behavior, bool invert, Tile tile) {
  std::vector<Piece> out;
  out.reserve(pieces->size() * 2);
  std::vector<PatternMatch> m;
  for (const Piece& p : *pieces) {
    tile(p.text, &m);
    if (invert) {
      for (PatternMatch& x : m) x.is_match = !x.is_match;
    }
    split_by(p, m, behavior, &out);
  }
  pieces->swap(out);
}

class Split final : public PreTokenizer {
 public:
  // fast_digits > 0: the pattern is Llama 3's / Qwen's, tekken: Mistral NeMo's, bloom: BLOOM's
  // (hf_fast_splits.h), scanned by hand.
  Split(std::unique_ptr<HfPattern> pattern, Behavior behavior, bool invert, int fast_digits = 0,
        bool tekken = false, bool bloom = false)
      : pattern_(std::move(pattern)),
        behavior_(behavior),
        invert_(invert),
        fast_digits_(fast_digits),
        tekken_(tekken),
        bloom_(bloom) {}
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    split_pieces(
        pieces, behavior_, invert_, [this](absl::string_view t, std::vector<PatternMatch>* m) {
          if ((fast_digits_ > 0 || tekken_) && !t.empty()) {
            m->clear();  // every position starts a match: the matches tile the text
            for (size_t pos = 0; pos < t.size();) {
              const size_t n =
                  tekken_ ? tekken_match_length(t, pos) : llama3_match_length(t, pos, fast_digits_);
              m->push_back({pos, pos + n, true});
              pos += n;
            }
          } else if (bloom_) {
            bloom_find_matches(t, m);
          } else {
            pattern_->find_matches(t, m);
          }
        });
  }

 private:
  std::unique_ptr<HfPattern> pattern_;
  Behavior behavior_;
  bool invert_;
  int fast_digits_;
  bool tekken_;
  bool bloom_;
};

// A code-point predicate split (Digits, Punctuation, WhitespaceSplit, CharDelimiterSplit).
template <typename Pred>
class CharSplit final : public PreTokenizer {
 public:
  CharSplit(Pred pred, Behavior behavior) : pred_(pred), behavior_(behavior) {}
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    split_pieces(
        pieces, behavior_, false,
        [this](absl::string_view t, std::vector<PatternMatch>* m) { char_matches(t, pred_, m); });
  }

 private:
  Pred pred_;
  Behavior behavior_;
};

template <typename Pred>
std::unique_ptr<PreTokenizer> char_split(Pred pred, Behavior behavior) {
  return std::make_unique<CharSplit<Pred>>(pred, behavior);
}

bool is_numeric(char32_t cp) { return utf8::is_number(cp); }  // Rust's char::is_numeric
bool is_punct(char32_t cp) { return is_bert_punctuation(cp); }

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), use_regex_(use_regex) {}
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces->size() * 4);
    std::string spaced;
    for (const Piece& p : *pieces) {
      absl::string_view text = p.text;
      if (add_prefix_space_ && !absl::StartsWith(text, " ")) {
        spaced = absl::StrCat(" ", text);
        text = spaced;
      }
      if (!use_regex_) {
        if (!text.empty()) out.push_back({to_byte_level(text), p.first});
        continue;
      }
      Gpt2PreTokenizer scanner(text);
      absl::string_view word;
      bool first = p.first;
      while (scanner.next(&word)) {
        out.push_back({to_byte_level(word), first});
        first = false;
      }
    }
    pieces->swap(out);
  }

 private:
  bool add_prefix_space_, use_regex_;
};

// tokenizers' Whitespace: the matches of `\w+|[^\w\s]+` (Rust's regex crate, so \w is
// is_rust_word_char), White_Space dropped.
class Whitespace final : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces->size() * 4);
    for (const Piece& p : *pieces) {
      const std::string& t = p.text;
      size_t begin = 0;
      int run = -1;  // the class of the current run: 0 word, 1 other; -1 none
      for (size_t pos = 0; pos <= t.size();) {
        int cls = -1;
        size_t len = 1;
        if (pos < t.size()) {
          const utf8::Decoded d = decode_utf8(t, pos);
          len = static_cast<size_t>(d.length);
          cls = utf8::is_white_space(d.cp) ? -1 : is_rust_word_char(d.cp) ? 0 : 1;
        }
        if (cls != run) {
          if (run >= 0) out.push_back({t.substr(begin, pos - begin), p.first && begin == 0});
          begin = pos;
          run = cls;
        }
        pos += len;
      }
    }
    pieces->swap(out);
  }
};

class Metaspace final : public PreTokenizer {
 public:
  enum class Scheme { kAlways, kFirst, kNever };
  Metaspace(char32_t replacement, Scheme scheme, bool split)
      : replacement_(replacement), scheme_(scheme), split_(split) {
    utf8::append(replacement, &rep_);
  }
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    for (Piece& p : *pieces) {
      std::string t;
      t.reserve(p.text.size() + 8);
      for (const char c : p.text) {
        if (c == ' ') {
          t += rep_;
        } else {
          t.push_back(c);
        }
      }
      const bool prepend = scheme_ == Scheme::kAlways || (scheme_ == Scheme::kFirst && p.first);
      if (prepend && !absl::StartsWith(t, rep_)) t.insert(0, rep_);
      p.text.swap(t);
    }
    if (!split_) return;
    const char32_t r = replacement_;
    split_pieces(pieces, Behavior::kMergedWithNext, false,
                 [r](absl::string_view t, std::vector<PatternMatch>* m) {
                   char_matches(
                       t, [r](char32_t c) { return c == r; }, m);
                 });
  }

 private:
  char32_t replacement_;
  std::string rep_;
  Scheme scheme_;
  bool split_;
};

// tokenizers' BertPreTokenizer (White_Space removed, then each punctuation character isolated)
// by bert_normalizer.h's scanner.
class BertPre final : public PreTokenizer {
 public:
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    std::vector<Piece> out;
    out.reserve(pieces->size() * 4);
    std::vector<std::pair<size_t, size_t>> words;
    for (const Piece& p : *pieces) {
      words.clear();
      bert_pre_tokenize(p.text, &words);
      for (const auto& [b, e] : words) out.push_back({p.text.substr(b, e - b), p.first && b == 0});
    }
    pieces->swap(out);
  }
};

class Sequence final : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void pre_tokenize(std::vector<Piece>* pieces) const override {
    for (const auto& s : steps_) s->pre_tokenize(pieces);
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// One code point from a JSON string field (Metaspace's replacement, CharDelimiterSplit's
// delimiter).
absl::Status get_char(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                      char32_t fallback, char32_t* out) {
  std::optional<std::string> s;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, obj, key, where, &s));
  *out = fallback;
  if (!s) return absl::OkStatus();
  const std::u32string cps = utf8::decode(*s);
  if (cps.size() != 1) return ctx.bad(absl::StrCat(where, ".", key), "must be one character");
  *out = cps[0];
  return absl::OkStatus();
}

absl::Status parse_metaspace(const Ctx& ctx, const json& p, const std::string& where,
                             std::unique_ptr<PreTokenizer>* out) {
  char32_t rep = 0x2581;
  ANVIL_RETURN_IF_ERROR(get_char(ctx, p, "replacement", where, 0x2581, &rep));
  bool split = true;
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "split", where, true, &split));
  std::optional<std::string> scheme;
  ANVIL_RETURN_IF_ERROR(get_string(ctx, p, "prepend_scheme", where, &scheme));
  Metaspace::Scheme s = Metaspace::Scheme::kAlways;
  if (!scheme) {  // older files: add_prefix_space (default true) means "always"
    bool add_prefix_space = true;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "add_prefix_space", where, true, &add_prefix_space));
    s = add_prefix_space ? Metaspace::Scheme::kAlways : Metaspace::Scheme::kNever;
  } else if (*scheme == "always") {
    s = Metaspace::Scheme::kAlways;
  } else if (*scheme == "first") {
    s = Metaspace::Scheme::kFirst;
  } else if (*scheme == "never") {
    s = Metaspace::Scheme::kNever;
  } else {
    return ctx.bad(where + ".prepend_scheme", "must be always, first or never");
  }
  *out = std::make_unique<Metaspace>(rep, s, split);
  return absl::OkStatus();
}

absl::Status parse_split(const Ctx& ctx, const json& p, const std::string& where,
                         std::unique_ptr<PreTokenizer>* out) {
  ANVIL_ASSIGN_OR_RETURN(const PatternSpec spec, get_pattern(ctx, p, where));
  ANVIL_ASSIGN_OR_RETURN(auto pattern, HfPattern::create(ctx, spec, where + ".pattern"));
  Behavior behavior = Behavior::kRemoved;
  const auto b = p.find("behavior");
  if (b == p.end()) return ctx.bad(where + ".behavior", "is missing");
  ANVIL_RETURN_IF_ERROR(get_behavior(ctx, p, where, Behavior::kRemoved, &behavior));
  bool invert = false;
  ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "invert", where, false, &invert));
  *out = std::make_unique<Split>(std::move(pattern), behavior, invert,
                                 spec.is_regex ? fast_split_digits(spec.text) : 0,
                                 spec.is_regex && spec.text == kTekkenSplitPattern,
                                 spec.is_regex && spec.text == kBloomSplitPattern);
  return absl::OkStatus();
}

}  // namespace

absl::Status parse_pre_tokenizer(const Ctx& ctx, const json& p, const std::string& where,
                                 std::unique_ptr<PreTokenizer>* out) {
  out->reset();
  if (p.is_null()) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(const std::string type, get_type(ctx, p, where));
  if (type == "Sequence") {
    ANVIL_ASSIGN_OR_RETURN(const json* list, get_array(ctx, p, "pretokenizers", where));
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < list->size(); ++i) {
      std::unique_ptr<PreTokenizer> step;
      ANVIL_RETURN_IF_ERROR(parse_pre_tokenizer(
          ctx, (*list)[i], absl::StrCat(where, ".pretokenizers[", i, "]"), &step));
      if (step != nullptr) steps.push_back(std::move(step));
    }
    *out = std::make_unique<Sequence>(std::move(steps));
  } else if (type == "Split") {
    return parse_split(ctx, p, where, out);
  } else if (type == "ByteLevel") {
    bool add_prefix_space = true, use_regex = true;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "add_prefix_space", where, true, &add_prefix_space));
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "use_regex", where, true, &use_regex));
    *out = std::make_unique<ByteLevel>(add_prefix_space, use_regex);
  } else if (type == "Metaspace") {
    return parse_metaspace(ctx, p, where, out);
  } else if (type == "Digits") {
    bool individual = false;
    ANVIL_RETURN_IF_ERROR(get_bool(ctx, p, "individual_digits", where, false, &individual));
    *out = char_split(is_numeric, individual ? Behavior::kIsolated : Behavior::kContiguous);
  } else if (type == "Punctuation") {
    Behavior behavior = Behavior::kIsolated;
    ANVIL_RETURN_IF_ERROR(get_behavior(ctx, p, where, Behavior::kIsolated, &behavior));
    *out = char_split(is_punct, behavior);
  } else if (type == "WhitespaceSplit") {
    *out = char_split(utf8::is_white_space, Behavior::kRemoved);
  } else if (type == "Whitespace") {
    *out = std::make_unique<Whitespace>();
  } else if (type == "BertPreTokenizer") {
    *out = std::make_unique<BertPre>();
  } else if (type == "CharDelimiterSplit") {
    char32_t delimiter = 0;
    if (p.find("delimiter") == p.end()) return ctx.bad(where + ".delimiter", "is missing");
    ANVIL_RETURN_IF_ERROR(get_char(ctx, p, "delimiter", where, 0, &delimiter));
    std::string d;
    utf8::append(delimiter, &d);
    ANVIL_ASSIGN_OR_RETURN(auto pattern, HfPattern::create(ctx, PatternSpec{false, d}, where));
    *out = std::make_unique<Split>(std::move(pattern), Behavior::kRemoved, false);
  } else {
    return ctx.unsupported(where, type,
                           "supported: Sequence, Split, ByteLevel, Metaspace, Digits, "
                           "Punctuation, Whitespace, WhitespaceSplit, BertPreTokenizer, "
                           "CharDelimiterSplit");
  }
  return absl::OkStatus();
}

}  // namespace anvil::io::hf_internal
