// Scanners equal to Oniguruma on known Split patterns (io/tokenizers/hf_fast_splits.h).
#include "io/tokenizers/hf_fast_splits.h"

#include <array>

#include "io/tokenizers/utf8.h"

namespace anvil::io::hf_internal {
namespace {

using utf8::CharClass;

struct Char {
  char32_t cp;
  size_t len;
  CharClass cls;
};

Char char_at(absl::string_view text, size_t pos) {
  const unsigned char b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return {b, 1, utf8::char_class(b)};
  const utf8::Decoded d = utf8::decode_at(text, pos);
  return {d.cp, static_cast<size_t>(d.length), utf8::char_class(d.cp)};
}

bool is_crlf(char32_t c) { return c == '\r' || c == '\n'; }

// (?i:...) folds: 's' also matches U+017F (long s), which case-folds to 's'.
bool folds_to(char32_t c, char lower) {
  if (c == static_cast<char32_t>(lower) || c == static_cast<char32_t>(lower - 'a' + 'A')) {
    return true;
  }
  return lower == 's' && c == 0x017F;
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d) at pos (text[pos] == '\''): the match length or 0.
size_t contraction(absl::string_view text, size_t pos) {
  size_t p = pos + 1;
  if (p >= text.size()) return 0;
  const Char a = char_at(text, p);
  for (const char single : {'s', 't'}) {
    if (folds_to(a.cp, single)) return 1 + a.len;
  }
  for (const char* two : {"re", "ve"}) {
    if (folds_to(a.cp, two[0]) && p + a.len < text.size() &&
        folds_to(char_at(text, p + a.len).cp, two[1])) {
      return 1 + a.len + char_at(text, p + a.len).len;
    }
  }
  if (folds_to(a.cp, 'm')) return 1 + a.len;
  if (folds_to(a.cp, 'l') && p + a.len < text.size() &&
      folds_to(char_at(text, p + a.len).cp, 'l')) {
    return 1 + a.len + char_at(text, p + a.len).len;
  }
  if (folds_to(a.cp, 'd')) return 1 + a.len;
  return 0;
}

// End of the run of characters from `pos` whose class satisfies `pred`.
template <typename Pred>
size_t run_end(absl::string_view text, size_t pos, Pred pred, int max_chars = -1) {
  int n = 0;
  while (pos < text.size() && n != max_chars) {
    const Char c = char_at(text, pos);
    if (!pred(c)) break;
    pos += c.len;
    ++n;
  }
  return pos;
}

// \s*[\r\n]+|\s+(?!\S)|\s+ at pos, a White_Space character (the alternatives Llama 3's, Qwen's
// and Tekken's patterns end with).
size_t space_match_length(absl::string_view text, size_t pos) {
  auto space = [](const Char& x) { return x.cls == CharClass::kSpace; };
  // W = the whole run.
  const size_t w_end = run_end(text, pos, space);
  // \s*[\r\n]+ : up to and including the last CR/LF of W.
  size_t last_crlf = std::string::npos;
  for (size_t p = pos; p < w_end;) {
    const Char x = char_at(text, p);
    if (is_crlf(x.cp)) last_crlf = p;
    p += x.len;
  }
  if (last_crlf != std::string::npos) return last_crlf + 1 - pos;
  // \s+(?!\S): all of W at the end of the text, else W without its last character.
  if (w_end == text.size()) return w_end - pos;
  size_t last = w_end - 1;
  while ((static_cast<unsigned char>(text[last]) & 0xC0) == 0x80) --last;
  if (last > pos) return last - pos;
  return w_end - pos;  // \s+
}

}  // namespace

int fast_split_digits(const std::string& pattern) {
  if (pattern == kLlama3SplitPattern) return 3;
  if (pattern == kQwenSplitPattern) return 1;
  return 0;
}

size_t llama3_match_length(absl::string_view text, size_t pos, int max_digits) {
  const Char c = char_at(text, pos);
  if (c.cp == '\'') {
    if (const size_t n = contraction(text, pos)) return n;
  }
  auto letter = [](const Char& x) { return x.cls == CharClass::kLetter; };
  auto number = [](const Char& x) { return x.cls == CharClass::kNumber; };
  auto other = [](const Char& x) { return x.cls == CharClass::kOther; };
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c.cls == CharClass::kLetter) return run_end(text, pos, letter) - pos;
  if (!is_crlf(c.cp) && c.cls != CharClass::kNumber && pos + c.len < text.size() &&
      letter(char_at(text, pos + c.len))) {
    return run_end(text, pos + c.len, letter) - pos;
  }
  // \p{N}{1,max}
  if (c.cls == CharClass::kNumber) return run_end(text, pos, number, max_digits) - pos;
  // ' ?[^\s\p{L}\p{N}]+[\r\n]*'
  size_t start = pos;
  if (c.cp == ' ' && pos + 1 < text.size() && other(char_at(text, pos + 1))) start = pos + 1;
  if (other(char_at(text, start))) {
    const size_t end = run_end(text, start, other);
    return run_end(text, end, [](const Char& x) { return is_crlf(x.cp); }) - pos;
  }
  return space_match_length(text, pos);
}

namespace {

// Tekken's letter classes: U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], L = [\p{Ll}\p{Lm}\p{Lo}\p{M}].
struct TekkenChar {
  size_t len;
  bool u, l, letter, number, space, crlf;
};

// The ASCII characters' TekkenChar, by table (English text is mostly these).
constexpr std::array<TekkenChar, 128> make_ascii_tekken() {
  std::array<TekkenChar, 128> t{};
  for (int b = 0; b < 128; ++b) {
    const bool upper = b >= 'A' && b <= 'Z', lower = b >= 'a' && b <= 'z';
    const bool space = (b >= 0x09 && b <= 0x0D) || b == ' ';
    t[b] = {1, upper, lower, upper || lower, b >= '0' && b <= '9', space, b == '\r' || b == '\n'};
  }
  return t;
}
constexpr std::array<TekkenChar, 128> kAsciiTekken = make_ascii_tekken();

inline TekkenChar tekken_char_at(absl::string_view text, size_t pos) {
  const unsigned char b = static_cast<unsigned char>(text[pos]);
  if (b < 0x80) return kAsciiTekken[b];
  const utf8::Decoded d = utf8::decode_at(text, pos);
  const utf8::Category c = utf8::category(d.cp);
  const bool both = c == utf8::Category::kLm || c == utf8::Category::kLo || utf8::is_mark(c);
  return {static_cast<size_t>(d.length),
          both || c == utf8::Category::kLu || c == utf8::Category::kLt,
          both || c == utf8::Category::kLl,
          utf8::is_letter(c),
          utf8::is_number(c),
          utf8::is_white_space(d.cp),
          false};
}

template <typename Pred>
size_t tekken_run_end(absl::string_view text, size_t pos, Pred pred) {
  while (pos < text.size()) {
    const TekkenChar c = tekken_char_at(text, pos);
    if (!pred(c)) break;
    pos += c.len;
  }
  return pos;
}

// U*L+ from s, as the backtracking matcher finds it: U* takes the whole U run, then gives back
// characters until L+ can start; the end of that match, or npos. If the character after the
// run is in L, L+ starts there; else at the run's last character that is also in L (Lm, Lo, M),
// which it takes alone (the next one is not in L).
size_t tekken_upper_lower(absl::string_view text, size_t s) {
  size_t last = std::string::npos;
  size_t p = s;
  while (p < text.size()) {
    const TekkenChar c = tekken_char_at(text, p);
    if (!c.u) {
      if (c.l) return tekken_run_end(text, p + c.len, [](const TekkenChar& x) { return x.l; });
      break;
    }
    p += c.len;
    if (c.l) last = p;
  }
  return last;
}

// U+L* from s, or npos.
size_t tekken_upper_then_lower(absl::string_view text, size_t s) {
  if (s >= text.size() || !tekken_char_at(text, s).u) return std::string::npos;
  const size_t e = tekken_run_end(text, s, [](const TekkenChar& c) { return c.u; });
  return tekken_run_end(text, e, [](const TekkenChar& c) { return c.l; });
}

}  // namespace

size_t tekken_match_length(absl::string_view text, size_t pos) {
  const TekkenChar c = tekken_char_at(text, pos);
  // [^\r\n\p{L}\p{N}]? before each letter alternative: tried with the character, then without.
  const bool prefix = !c.crlf && !c.letter && !c.number;
  for (auto body : {tekken_upper_lower, tekken_upper_then_lower}) {
    if (prefix && pos + c.len < text.size()) {
      const size_t end = body(text, pos + c.len);
      if (end != std::string::npos) return end - pos;
    }
    const size_t end = body(text, pos);
    if (end != std::string::npos) return end - pos;
  }
  if (c.number) return c.len;  // \p{N}
  // ' ?[^\s\p{L}\p{N}]+[\r\n/]*'
  auto other = [](const TekkenChar& x) { return !x.space && !x.letter && !x.number; };
  size_t start = pos;
  if (text[pos] == ' ' && pos + 1 < text.size() && other(tekken_char_at(text, pos + 1))) {
    start = pos + 1;
  }
  if (other(tekken_char_at(text, start))) {
    const size_t end = tekken_run_end(text, start, other);
    size_t p = end;
    while (p < text.size() && (text[p] == '\r' || text[p] == '\n' || text[p] == '/')) ++p;
    return p - pos;
  }
  return space_match_length(text, pos);
}

namespace {

// A character the BLOOM class accepts.
bool bloom_content(char32_t c) {
  switch (c) {
    case '(':
    case '|':
    case ')':
    case '.':
    case ',':
    case '!':
    case '?':
    case 0x2026:
    case 0x3002:
    case 0xFF0C:
    case 0x3001:
    case 0x0964:
    case 0x06D4:
    case 0x060C:
      return false;
    default:
      return !utf8::is_white_space(c);
  }
}

}  // namespace

void bloom_find_matches(absl::string_view text, std::vector<PatternMatch>* out) {
  out->clear();
  if (text.empty()) {
    out->push_back({0, 0, false});
    return;
  }
  auto content = [](const Char& x) { return bloom_content(x.cp); };
  size_t prev = 0;
  for (size_t pos = 0; pos < text.size();) {
    const Char c = char_at(text, pos);
    size_t start = std::string::npos;
    if (c.cp == ' ' && pos + 1 < text.size() && bloom_content(char_at(text, pos + 1).cp)) {
      start = pos + 1;
    } else if (bloom_content(c.cp)) {
      start = pos;
    }
    if (start == std::string::npos) {
      pos += c.len;
      continue;
    }
    const size_t end = run_end(text, start, content);
    if (prev != pos) out->push_back({prev, pos, false});
    out->push_back({pos, end, true});
    prev = pos = end;
  }
  if (prev != text.size()) out->push_back({prev, text.size(), false});
}

}  // namespace anvil::io::hf_internal
