// UTF-8 and Unicode-property helpers shared by the tokenizers.
//
// Decoding follows Python's bytes.decode("utf-8", errors="replace") exactly, which is what the
// reference tokenizers see (tests/io/fixtures/tokenizers): a byte sequence is well formed per
// Unicode Table 3-7 (no overlongs, no surrogates, nothing above U+10FFFF), and each *maximal
// subpart* of an ill-formed sequence becomes one U+FFFD (Unicode §3.9 "U+FFFD Substitution of
// Maximal Subparts", the WHATWG Encoding Standard's rule). A maximal subpart is the longest
// prefix of a well-formed sequence that is present: a valid lead byte followed by as many
// continuation bytes in its allowed ranges as exist before the sequence breaks; a byte that
// cannot start any sequence (80..C1, F5..FF) is a subpart of length 1. Examples:
//   "\xe6\x97" (truncated) -> 1 x U+FFFD;  "\xed\xa0\x80" (surrogate) -> 3 x U+FFFD;
//   "\xc0\xaf" (overlong) -> 2 x U+FFFD;   "\xf0\x9f\x98" + "A" -> U+FFFD "A".
//
// Unicode properties come from utf8proc (general categories) plus a hard-coded White_Space
// table; ASCII goes through a 128-entry table so hot loops never leave the inline fast path.
// All functions are thread-safe and allocation-free unless they return a string.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace anvil::io::utf8 {

inline constexpr char32_t kReplacementChar = 0xFFFD;
inline constexpr char32_t kMaxCodePoint = 0x10FFFF;

// One decoded code point: `cp` and the number of bytes it spans (1..4). For an ill-formed
// maximal subpart, cp = U+FFFD, valid = false and length = the subpart's length (1..3).
struct Decoded {
  char32_t cp;
  int length;
  bool valid;
};

// Decodes the code point that starts at text[pos] (requires pos < text.size()).
Decoded decode_at(absl::string_view text, size_t pos);

// Length of the longest well-formed prefix of `text` (== text.size() when all of it is valid).
// Runs 8 bytes at a time over ASCII.
size_t valid_prefix_length(absl::string_view text);
inline bool is_valid(absl::string_view text) { return valid_prefix_length(text) == text.size(); }

// `text` with every maximal ill-formed subpart replaced by U+FFFD (EF BF BD), i.e.
// text.decode("utf-8", errors="replace").encode("utf-8") in Python.
std::string replace_invalid(absl::string_view text);

// Zero-copy variant for hot paths: returns `text` itself when it is valid, else fills *storage
// with replace_invalid(text) and returns a view of it.
absl::string_view replace_invalid(absl::string_view text, std::string* storage);

// Code points of `text` (ill-formed subparts decode to U+FFFD).
std::u32string decode(absl::string_view text);

// Number of UTF-8 bytes of `cp` (1..4); 3 for surrogates and values above U+10FFFF, which
// append()/encode() write as U+FFFD.
int encoded_length(char32_t cp);
// Appends the UTF-8 bytes of `cp` to *out (U+FFFD for a surrogate or a value > U+10FFFF).
void append(char32_t cp, std::string* out);
std::string encode(const std::u32string& code_points);

// ---- Unicode properties ---------------------------------------------------------------------

// Unicode general categories, in utf8proc's order (utf8proc_category_t): kCn (unassigned) = 0,
// then Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co.
enum class Category : uint8_t {
  kCn = 0,
  kLu,
  kLl,
  kLt,
  kLm,
  kLo,
  kMn,
  kMc,
  kMe,
  kNd,
  kNl,
  kNo,
  kPc,
  kPd,
  kPs,
  kPe,
  kPi,
  kPf,
  kPo,
  kSm,
  kSc,
  kSk,
  kSo,
  kZs,
  kZl,
  kZp,
  kCc,
  kCf,
  kCs,
  kCo,
};

Category category(char32_t cp);
inline bool is_letter(Category c) { return c >= Category::kLu && c <= Category::kLo; }  // \p{L}
inline bool is_mark(Category c) { return c >= Category::kMn && c <= Category::kMe; }    // \p{M}
inline bool is_number(Category c) { return c >= Category::kNd && c <= Category::kNo; }  // \p{N}
inline bool is_punctuation(Category c) {
  return c >= Category::kPc && c <= Category::kPo;
}  // \p{P}
inline bool is_symbol(Category c) { return c >= Category::kSm && c <= Category::kSo; }     // \p{S}
inline bool is_separator(Category c) { return c >= Category::kZs && c <= Category::kZp; }  // \p{Z}
// \p{C}: Cc Cf Cs Co and unassigned Cn.
inline bool is_other(Category c) { return c == Category::kCn || c >= Category::kCc; }

bool is_letter(char32_t cp);
bool is_number(char32_t cp);

// The Unicode White_Space property, which is what `\s` means in Python's `regex` module,
// Rust's regex (tiktoken) and Oniguruma (HF tokenizers): U+0009-000D, 0020, 0085, 00A0, 1680,
// 2000-200A, 2028, 2029, 202F, 205F, 3000. (Not Python's str.isspace(), which adds 1C-1F;
// not PCRE2's UCP \s, which lacks U+0085.)
bool is_white_space(char32_t cp);

// The coarse class that regex-based pre-tokenizers test: letter, number, White_Space, or
// anything else. ASCII is resolved by a table.
enum class CharClass : uint8_t { kLetter, kNumber, kSpace, kOther };
namespace detail {
extern const std::array<CharClass, 128> kAsciiCharClass;
CharClass non_ascii_char_class(char32_t cp);
}  // namespace detail
inline CharClass char_class(char32_t cp) {
  return cp < 128 ? detail::kAsciiCharClass[cp] : detail::non_ascii_char_class(cp);
}

// ---- Normalization --------------------------------------------------------------------------

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// `text` in the given normal form (utf8proc, with the Unicode version of the installed
// utf8proc). Ill-formed input is first passed through replace_invalid().
std::string normalize(absl::string_view text, NormalForm form);

}  // namespace anvil::io::utf8
