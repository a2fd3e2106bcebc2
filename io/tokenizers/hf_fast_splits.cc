// Scanners equal to Oniguruma on known Split patterns (io/tokenizers/hf_fast_splits.h).
#include "io/tokenizers/hf_fast_splits.h"

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
  auto space = [](const Char& x) { return x.cls == CharClass::kSpace; };
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
  // White_Space from here on: W = the whole run.
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
