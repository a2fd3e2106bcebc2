// Minimal JSON for bin/preprocess's JSONL input (io/json_strings.h): validates a whole object,
// decodes only the wanted top-level string values.
#include "io/json_strings.h"

#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/tokenizers/utf8.h"

namespace anvil::io {
namespace {

class JsonScanner {
 public:
  explicit JsonScanner(std::string_view s) : s_(s) {}

  absl::Status extract(const std::vector<std::string>& keys, std::vector<std::string>* values,
                       std::vector<size_t>* lone_surrogates) {
    values->assign(keys.size(), std::string());
    if (lone_surrogates != nullptr) lone_surrogates->assign(keys.size(), 0);
    std::vector<bool> found(keys.size(), false);
    skip_ws();
    if (!eat('{')) return error("expected '{' (each line must be one JSON object)");
    skip_ws();
    if (!eat('}')) {
      std::string key;
      while (true) {
        skip_ws();
        if (peek() != '"') return error("expected a string key");
        ANVIL_RETURN_IF_ERROR(parse_string(&key));
        skip_ws();
        if (!eat(':')) return error("expected ':' after a key");
        skip_ws();
        size_t wanted = keys.size();
        for (size_t i = 0; i < keys.size(); ++i) {
          if (keys[i] == key) wanted = i;
        }
        if (wanted < keys.size()) {
          if (peek() != '"') {
            return error(absl::StrCat("the value of key \"", key, "\" is not a string"));
          }
          lone_column_ = 0;
          ANVIL_RETURN_IF_ERROR(parse_string(&(*values)[wanted]));
          if (lone_surrogates != nullptr) (*lone_surrogates)[wanted] = lone_column_;
          found[wanted] = true;
        } else {
          ANVIL_RETURN_IF_ERROR(skip_value(0));
        }
        skip_ws();
        if (eat(',')) continue;
        if (eat('}')) break;
        return error("expected ',' or '}' in an object");
      }
    }
    skip_ws();
    if (pos_ != s_.size()) return error("trailing characters after the JSON object");
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!found[i]) {
        return absl::InvalidArgumentError(absl::StrCat("missing key \"", keys[i], "\""));
      }
    }
    return absl::OkStatus();
  }

 private:
  static constexpr int kMaxDepth = 512;

  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  bool eat(char c) {
    if (peek() != c || pos_ >= s_.size()) return false;
    ++pos_;
    return true;
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  void skip_ws() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("column ", pos_ + 1, ": ", what));
  }

  static int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  }

  // Reads the 4 hex digits after "\u".
  absl::Status parse_hex4(uint32_t* out) {
    if (pos_ + 4 > s_.size()) return error("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const int h = hex_digit(s_[pos_ + i]);
      if (h < 0) return error("bad hex digit in \\u escape");
      v = v * 16 + static_cast<uint32_t>(h);
    }
    pos_ += 4;
    *out = v;
    return absl::OkStatus();
  }

  // Parses a string starting at '"' into *out (decoded); out may be nullptr to skip.
  absl::Status parse_string(std::string* out) {
    if (out != nullptr) out->clear();
    ++pos_;  // opening quote
    while (true) {
      // Copy the run of plain bytes up to the next quote, backslash or control character.
      const size_t run = pos_;
      while (pos_ < s_.size() && s_[pos_] != '"' && s_[pos_] != '\\' &&
             static_cast<unsigned char>(s_[pos_]) >= 0x20) {
        ++pos_;
      }
      if (out != nullptr) out->append(s_.data() + run, pos_ - run);
      if (pos_ >= s_.size()) return error("unterminated string");
      const char c = s_[pos_];
      if (c == '"') {
        ++pos_;
        return absl::OkStatus();
      }
      if (c != '\\') return error("unescaped control character in a string");
      ++pos_;
      if (pos_ >= s_.size()) return error("unterminated escape");
      const char e = s_[pos_++];
      char plain = 0;
      switch (e) {
        case '"':
          plain = '"';
          break;
        case '\\':
          plain = '\\';
          break;
        case '/':
          plain = '/';
          break;
        case 'b':
          plain = '\b';
          break;
        case 'f':
          plain = '\f';
          break;
        case 'n':
          plain = '\n';
          break;
        case 'r':
          plain = '\r';
          break;
        case 't':
          plain = '\t';
          break;
        case 'u': {
          const size_t escape = pos_ - 2;  // the backslash
          uint32_t cp = 0;
          ANVIL_RETURN_IF_ERROR(parse_hex4(&cp));
          bool lone = false;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            // A high surrogate combines with an immediately following \uDC00-\uDFFF.
            uint32_t lo = 0;
            lone = true;
            if (pos_ + 6 <= s_.size() && s_[pos_] == '\\' && s_[pos_ + 1] == 'u') {
              const size_t save = pos_;
              pos_ += 2;
              ANVIL_RETURN_IF_ERROR(parse_hex4(&lo));
              if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                lone = false;
              } else {
                pos_ = save;  // not a pair: re-read that escape on its own
              }
            }
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            lone = true;  // lone low surrogate
          }
          if (lone) {
            cp = 0xFFFD;
            if (lone_column_ == 0) lone_column_ = escape + 1;
          }
          if (out != nullptr) utf8::append(static_cast<char32_t>(cp), out);
          continue;
        }
        default:
          --pos_;
          return error(absl::StrCat("bad escape '\\", std::string(1, e), "'"));
      }
      if (out != nullptr) out->push_back(plain);
    }
  }

  absl::Status skip_number() {
    const size_t start = pos_;
    eat('-');
    if (eat_word("Infinity")) return absl::OkStatus();
    if (eat('0')) {
    } else if (absl::ascii_isdigit(peek())) {
      while (absl::ascii_isdigit(peek())) ++pos_;
    } else {
      pos_ = start;
      return error("bad number");
    }
    if (eat('.')) {
      if (!absl::ascii_isdigit(peek())) return error("bad number: digits expected after '.'");
      while (absl::ascii_isdigit(peek())) ++pos_;
    }
    if (peek() == 'e' || peek() == 'E') {
      ++pos_;
      if (peek() == '+' || peek() == '-') ++pos_;
      if (!absl::ascii_isdigit(peek())) return error("bad number: digits expected in exponent");
      while (absl::ascii_isdigit(peek())) ++pos_;
    }
    return absl::OkStatus();
  }

  absl::Status skip_value(int depth) {
    if (depth > kMaxDepth) return error("nesting too deep");
    const char c = peek();
    if (c == '"') return parse_string(nullptr);
    if (c == '{' || c == '[') {
      const char close = c == '{' ? '}' : ']';
      ++pos_;
      skip_ws();
      if (eat(close)) return absl::OkStatus();
      while (true) {
        skip_ws();
        if (c == '{') {
          if (peek() != '"') return error("expected a string key");
          ANVIL_RETURN_IF_ERROR(parse_string(nullptr));
          skip_ws();
          if (!eat(':')) return error("expected ':' after a key");
          skip_ws();
        }
        ANVIL_RETURN_IF_ERROR(skip_value(depth + 1));
        skip_ws();
        if (eat(',')) continue;
        if (eat(close)) return absl::OkStatus();
        return error(c == '{' ? "expected ',' or '}' in an object"
                              : "expected ',' or ']' in an array");
      }
    }
    if (eat_word("true") || eat_word("false") || eat_word("null") || eat_word("NaN")) {
      return absl::OkStatus();
    }
    if (c == '-' || absl::ascii_isdigit(c) || c == 'I') {
      if (c == 'I') return eat_word("Infinity") ? absl::OkStatus() : error("unexpected 'I'");
      return skip_number();
    }
    if (pos_ >= s_.size()) return error("unexpected end of line, a value was expected");
    return error(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }

  std::string_view s_;
  size_t pos_ = 0;
  size_t lone_column_ = 0;  // 1-based column of the first lone surrogate in the value, or 0
};

}  // namespace

absl::Status extract_json_strings(std::string_view line, const std::vector<std::string>& keys,
                                  std::vector<std::string>* values,
                                  std::vector<size_t>* lone_surrogates) {
  return JsonScanner(line).extract(keys, values, lone_surrogates);
}

}  // namespace anvil::io
