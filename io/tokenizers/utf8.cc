// UTF-8 decoding with Python-compatible replacement of ill-formed subparts (Unicode Table 3-7
// ranges, one U+FFFD per maximal subpart), encoding, and Unicode properties via utf8proc.
#include "io/tokenizers/utf8.h"

#include <utf8proc.h>

#include <array>
#include <cstdlib>
#include <cstring>
#include <utility>

namespace anvil::io::utf8 {
namespace {

constexpr char kReplacementUtf8[] = "\xEF\xBF\xBD";

// The class of every ASCII code point: A-Z a-z letters, 0-9 numbers, White_Space = 09-0D and
// 20 (1C-1F are Cc, not White_Space), everything else (punctuation, symbols, controls) other.
constexpr CharClass ascii_class(int c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) return CharClass::kLetter;
  if (c >= '0' && c <= '9') return CharClass::kNumber;
  if ((c >= 0x09 && c <= 0x0D) || c == 0x20) return CharClass::kSpace;
  return CharClass::kOther;
}

template <size_t... I>
constexpr std::array<CharClass, sizeof...(I)> make_ascii_classes(std::index_sequence<I...>) {
  return {ascii_class(static_cast<int>(I))...};
}

bool all_ascii8(const char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);
  return (w & 0x8080808080808080ull) == 0;
}

}  // namespace

namespace detail {
// Constant-initialized (constexpr generator), so usable from other static initializers.
const std::array<CharClass, 128> kAsciiCharClass =
    make_ascii_classes(std::make_index_sequence<128>());
}  // namespace detail

Decoded decode_at(absl::string_view text, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  const size_t avail = text.size() - pos;
  const unsigned char b0 = p[0];
  if (b0 < 0x80) return {b0, 1, true};
  // Continuation bytes allowed after the lead (Table 3-7): the second byte's range is narrowed
  // for E0 (no overlongs), ED (no surrogates), F0 (no overlongs) and F4 (<= U+10FFFF).
  int need;
  char32_t cp;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    need = 1;
    cp = b0 & 0x1F;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    need = 2;
    cp = b0 & 0x0F;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    need = 3;
    cp = b0 & 0x07;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  } else {
    return {kReplacementChar, 1, false};  // 80..BF, C0, C1, F5..FF never start a sequence
  }
  for (int i = 1; i <= need; ++i) {
    // The maximal subpart ends before the first missing or out-of-range byte.
    if (static_cast<size_t>(i) >= avail || p[i] < lo || p[i] > hi) {
      return {kReplacementChar, i, false};
    }
    cp = (cp << 6) | (p[i] & 0x3F);
    lo = 0x80;
    hi = 0xBF;
  }
  return {cp, need + 1, true};
}

size_t valid_prefix_length(absl::string_view text) {
  size_t pos = 0;
  const size_t n = text.size();
  while (pos < n) {
    if (pos + 8 <= n && all_ascii8(text.data() + pos)) {
      pos += 8;
      continue;
    }
    const Decoded d = decode_at(text, pos);
    if (!d.valid) return pos;
    pos += d.length;
  }
  return n;
}

std::string replace_invalid(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t good = valid_prefix_length(text.substr(pos));
    out.append(text.data() + pos, good);
    pos += good;
    if (pos == text.size()) break;
    out.append(kReplacementUtf8, 3);
    pos += decode_at(text, pos).length;
  }
  return out;
}

absl::string_view replace_invalid(absl::string_view text, std::string* storage) {
  if (is_valid(text)) return text;
  *storage = replace_invalid(text);
  return *storage;
}

std::u32string decode(absl::string_view text) {
  std::u32string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Decoded d = decode_at(text, pos);
    out.push_back(d.cp);
    pos += d.length;
  }
  return out;
}

int encoded_length(char32_t cp) {
  if (cp < 0x80) return 1;
  if (cp < 0x800) return 2;
  if (cp < 0x10000 || cp > kMaxCodePoint) return 3;
  return 4;
}

void append(char32_t cp, std::string* out) {
  if ((cp >= 0xD800 && cp <= 0xDFFF) || cp > kMaxCodePoint) cp = kReplacementChar;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string encode(const std::u32string& code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (const char32_t cp : code_points) append(cp, &out);
  return out;
}

Category category(char32_t cp) {
  if (cp > kMaxCodePoint) return Category::kCn;
  return static_cast<Category>(utf8proc_category(static_cast<utf8proc_int32_t>(cp)));
}

bool is_letter(char32_t cp) {
  if (cp < 128) return detail::kAsciiCharClass[cp] == CharClass::kLetter;
  return is_letter(category(cp));
}

bool is_number(char32_t cp) {
  if (cp < 128) return detail::kAsciiCharClass[cp] == CharClass::kNumber;
  return is_number(category(cp));
}

bool is_white_space(char32_t cp) {
  if (cp < 128) return detail::kAsciiCharClass[cp] == CharClass::kSpace;
  switch (cp) {
    case 0x0085:
    case 0x00A0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

namespace detail {

CharClass non_ascii_char_class(char32_t cp) {
  if (is_white_space(cp)) return CharClass::kSpace;
  const Category c = category(cp);
  if (is_letter(c)) return CharClass::kLetter;
  if (is_number(c)) return CharClass::kNumber;
  return CharClass::kOther;
}

}  // namespace detail

std::string normalize(absl::string_view text, NormalForm form) {
  std::string storage;
  const absl::string_view valid = replace_invalid(text, &storage);
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* mapped = nullptr;
  const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(valid.data()),
                                          static_cast<utf8proc_ssize_t>(valid.size()), &mapped,
                                          static_cast<utf8proc_option_t>(options));
  // utf8proc only fails on invalid UTF-8 (excluded above) or out of memory; fall back to the
  // unnormalized text rather than losing it.
  std::string out = n < 0 ? std::string(valid) : std::string(reinterpret_cast<char*>(mapped), n);
  std::free(mapped);
  return out;
}

}  // namespace anvil::io::utf8
