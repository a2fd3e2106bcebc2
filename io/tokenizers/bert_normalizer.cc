// BERT normalizer and pre-tokenizer (see bert_normalizer.h for the rules and their sources).
// ASCII text takes a single pass with table-free byte tests; text with other characters takes
// a second pass for lowercasing and accent stripping through utf8proc.
#include "io/tokenizers/bert_normalizer.h"

#include <utf8proc.h>

#include "io/tokenizers/utf8.h"

namespace anvil::io {
namespace {

using Rules = BertNormalizerOptions::Rules;

bool is_control(char32_t cp, Rules rules) {
  if (cp == '\t' || cp == '\n' || cp == '\r') return false;  // whitespace, not control
  const utf8::Category c = utf8::category(cp);
  if (c == utf8::Category::kCc || c == utf8::Category::kCf) return true;
  // tokenizers' is_control is Rust's `is_other`: all of \p{C}.
  return rules == Rules::kHf && utf8::is_other(c);
}

bool is_clean_whitespace(char32_t cp, Rules rules) {
  if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') return true;
  if (rules == Rules::kHf) return utf8::is_white_space(cp);
  return utf8::category(cp) == utf8::Category::kZs;
}

// NFD, then drops the nonspacing marks (Mn). `text` is valid UTF-8.
std::string strip_accents(absl::string_view text) {
  const std::string nfd = utf8::normalize(text, utf8::NormalForm::kNFD);
  std::string out;
  out.reserve(nfd.size());
  for (size_t pos = 0; pos < nfd.size();) {
    const utf8::Decoded d = utf8::decode_at(nfd, pos);
    if (d.cp < 0x80 || utf8::category(d.cp) != utf8::Category::kMn) {
      out.append(nfd, pos, d.length);
    }
    pos += d.length;
  }
  return out;
}

std::string lowercase(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const utf8::Decoded d = utf8::decode_at(text, pos);
    append_lowercase(d.cp, &out);
    pos += d.length;
  }
  return out;
}

}  // namespace

bool is_cjk_ideograph(char32_t cp) {
  return (cp >= 0x4E00 && cp <= 0x9FFF) || (cp >= 0x3400 && cp <= 0x4DBF) ||
         (cp >= 0x20000 && cp <= 0x2A6DF) || (cp >= 0x2A700 && cp <= 0x2B73F) ||
         (cp >= 0x2B740 && cp <= 0x2B81F) || (cp >= 0x2B820 && cp <= 0x2CEAF) ||
         (cp >= 0xF900 && cp <= 0xFAFF) || (cp >= 0x2F800 && cp <= 0x2FA1F);
}

bool is_bert_punctuation(char32_t cp) {
  if ((cp >= 33 && cp <= 47) || (cp >= 58 && cp <= 64) || (cp >= 91 && cp <= 96) ||
      (cp >= 123 && cp <= 126)) {
    return true;
  }
  if (cp < 0x80) return false;
  return utf8::is_punctuation(utf8::category(cp));
}

void append_lowercase(char32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp));
    return;
  }
  // The one unconditional one-to-many lowercase mapping in SpecialCasing.txt; utf8proc_tolower
  // gives the simple mapping 'i' only.
  if (cp == 0x0130) {
    out->append("i\xCC\x87");  // U+0069 U+0307
    return;
  }
  utf8::append(static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(cp))), out);
}

void bert_normalize(absl::string_view text, const BertNormalizerOptions& options,
                    std::string* out) {
  out->clear();
  out->reserve(text.size() + 16);
  bool non_ascii = false;
  for (size_t pos = 0; pos < text.size();) {
    const unsigned char b = static_cast<unsigned char>(text[pos]);
    if (b < 0x80) {
      ++pos;
      char c = static_cast<char>(b);
      if (options.clean_text) {
        if (c == '\t' || c == '\n' || c == '\r') {
          c = ' ';
        } else if (b < 0x20 || b == 0x7F) {
          continue;  // U+0000 and the other C0 controls and DEL (Cc)
        }
      }
      if (options.lowercase && c >= 'A' && c <= 'Z') c = static_cast<char>(c + ('a' - 'A'));
      out->push_back(c);
      continue;
    }
    const utf8::Decoded d = utf8::decode_at(text, pos);
    pos += d.length;
    char32_t cp = d.cp;
    if (options.clean_text) {
      if (cp == utf8::kReplacementChar || is_control(cp, options.rules)) continue;
      if (is_clean_whitespace(cp, options.rules)) {
        out->push_back(' ');
        continue;
      }
    }
    non_ascii = true;
    if (options.handle_chinese_chars && is_cjk_ideograph(cp)) {
      out->push_back(' ');
      utf8::append(cp, out);
      out->push_back(' ');
    } else {
      utf8::append(cp, out);
    }
  }
  if (!non_ascii || !(options.lowercase || options.strip_accents)) return;
  // ASCII is already lowercased and has no decomposition; the rest needs a second pass. The
  // order follows each reference (it only matters for exotic compositions).
  if (options.rules == Rules::kPython) {
    if (options.lowercase) *out = lowercase(*out);
    if (options.strip_accents) *out = strip_accents(*out);
  } else {
    if (options.strip_accents) *out = strip_accents(*out);
    if (options.lowercase) *out = lowercase(*out);
  }
}

void bert_pre_tokenize(absl::string_view normalized,
                       std::vector<std::pair<size_t, size_t>>* words) {
  size_t start = 0;  // begin of the current word
  size_t pos = 0;
  while (pos < normalized.size()) {
    const unsigned char b = static_cast<unsigned char>(normalized[pos]);
    char32_t cp;
    int length;
    if (b < 0x80) {
      cp = b;
      length = 1;
    } else {
      const utf8::Decoded d = utf8::decode_at(normalized, pos);
      cp = d.cp;
      length = d.length;
    }
    const bool space = utf8::is_white_space(cp);
    if (space || is_bert_punctuation(cp)) {
      if (pos > start) words->emplace_back(start, pos);
      if (!space) words->emplace_back(pos, pos + length);
      start = pos + length;
    }
    pos += length;
  }
  if (pos > start) words->emplace_back(start, pos);
}

}  // namespace anvil::io
