// Jinja tokenizer (io/jinja/lexer.h), a port of @huggingface/jinja's lexer.ts: the same
// preprocessing and the same token boundaries, so that templates render identically.
#include "io/jinja/lexer.h"

#include <cctype>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "io/jinja/value.h"

namespace anvil::io::jinja {
namespace {

// The template after preprocessing, with the original line of every byte.
struct Source {
  std::string text;
  std::vector<int> line;
  void add(char c, int l) {
    text += c;
    line.push_back(l);
  }
};

bool starts(const std::string& s, size_t i, const char* p) {
  return s.compare(i, strlen(p), p) == 0;
}

Source preprocess(const std::string& in) {
  Source s;
  int l = 1;
  for (char c : in) {
    s.add(c, l);
    l += c == '\n';
  }
  if (!s.text.empty() && s.text.back() == '\n') {
    s.text.pop_back();
    s.line.pop_back();
  }
  auto rebuild = [](const Source& from, auto keep) {
    Source out;
    for (size_t i = 0; i < from.text.size(); ++i) {
      if (keep(i)) out.add(from.text[i], from.line[i]);
    }
    return out;
  };
  // lstrip_blocks: /^[ \t]*({[#%-])/gm -> "$1" (a line start: after \n or \r).
  {
    const std::string& t = s.text;
    std::vector<bool> drop(t.size(), false);
    for (size_t i = 0; i < t.size(); ++i) {
      if (i != 0 && t[i - 1] != '\n' && t[i - 1] != '\r') continue;
      size_t j = i;
      while (j < t.size() && (t[j] == ' ' || t[j] == '\t')) ++j;
      if (j > i && j + 1 < t.size() && t[j] == '{' &&
          (t[j + 1] == '#' || t[j + 1] == '%' || t[j + 1] == '-')) {
        for (size_t k = i; k < j; ++k) drop[k] = true;
      }
    }
    s = rebuild(s, [&](size_t i) { return !drop[i]; });
  }
  // trim_blocks: /([#%-]})\n/g -> "$1".
  {
    const std::string& t = s.text;
    std::vector<bool> drop(t.size(), false);
    for (size_t i = 0; i + 2 < t.size(); ++i) {
      if ((t[i] == '#' || t[i] == '%' || t[i] == '-') && t[i + 1] == '}' && t[i + 2] == '\n') {
        drop[i + 2] = true;
        i += 2;
      }
    }
    s = rebuild(s, [&](size_t i) { return !drop[i]; });
  }
  // transformers' {% generation %} / {% endgeneration %}: removed, with the whitespace around
  // them unless a '-' strips it: /(\s*){%(-?)\s*(?:end)?generation\s*(-?)%}(\s*)/gs.
  {
    const std::string& t = s.text;
    std::vector<bool> drop(t.size(), false);
    size_t i = 0;
    while ((i = t.find("{%", i)) != std::string::npos) {
      size_t j = i + 2;
      const bool lstrip = j < t.size() && t[j] == '-';
      j += lstrip;
      while (size_t n = js_space_at(t, j)) j += n;
      if (starts(t, j, "end")) j += 3;
      if (!starts(t, j, "generation")) {
        i += 2;
        continue;
      }
      j += 10;
      while (size_t n = js_space_at(t, j)) j += n;
      const bool rstrip = j < t.size() && t[j] == '-';
      j += rstrip;
      if (!starts(t, j, "%}")) {
        i += 2;
        continue;
      }
      j += 2;
      size_t b = i;  // whitespace before (bytes of one space may be several)
      if (lstrip) {
        while (b > 0) {
          size_t k = b - 1;
          while (k > 0 && (static_cast<unsigned char>(t[k]) & 0xC0) == 0x80) --k;
          if (js_space_at(t, k) != b - k) break;
          b = k;
        }
      }
      size_t e = j;
      if (rstrip) {
        while (size_t n = js_space_at(t, e)) e += n;
      }
      for (size_t k = b; k < e; ++k) drop[k] = true;
      i = e;
    }
    s = rebuild(s, [&](size_t i) { return !drop[i]; });
  }
  return s;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_word(char c) {
  return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    *out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    *out += static_cast<char>(0xC0 | (cp >> 6));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    *out += static_cast<char>(0xE0 | (cp >> 12));
    *out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    *out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Operators in the order @huggingface/jinja tries them (longest first where they share a prefix).
constexpr const char* kOps[] = {"{%", "%}", "{{", "}}", "(",  ")",  "{",  "}",  "[", "]",
                                ",",  ".",  ":",  "|",  "<=", ">=", "==", "!=", "<", ">",
                                "+",  "-",  "~",  "**", "*",  "//", "/",  "%",  "="};

}  // namespace

size_t js_space_at(const std::string& s, size_t i) {
  if (i >= s.size()) return 0;
  const unsigned char c = s[i];
  if (c == ' ' || (c >= 0x09 && c <= 0x0D)) return 1;
  if (c < 0xC2) return 0;
  uint32_t cp = 0;
  size_t n = c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
  if (i + n > s.size()) return 0;
  cp = c & (n == 2 ? 0x1F : n == 3 ? 0x0F : 0x07);
  for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  const bool space = cp == 0xA0 || cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 ||
                     cp == 0x2029 || cp == 0x202F || cp == 0x205F || cp == 0x3000 || cp == 0xFEFF;
  return space ? n : 0;
}

std::string js_trim_start(const std::string& s) {
  size_t i = 0;
  while (size_t n = js_space_at(s, i)) i += n;
  return s.substr(i);
}

std::string js_trim_end(const std::string& s) {
  size_t e = s.size();
  while (e > 0) {
    size_t k = e - 1;
    while (k > 0 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (js_space_at(s, k) != e - k) break;
    e = k;
  }
  return s.substr(0, e);
}

std::vector<Token> tokenize(const std::string& source) {
  using T = Token::Type;
  const Source src = preprocess(source);
  const std::string& s = src.text;
  const size_t n = s.size();
  std::vector<Token> tokens;
  size_t pos = 0;
  int curly = 0;
  auto line = [&](size_t i) { return src.line.empty() ? 1 : src.line[std::min(i, n - 1)]; };
  auto fail = [&](const std::string& m) { throw Error(line(pos), m); };
  auto push = [&](T type, std::string v, size_t at) {
    tokens.push_back({type, std::move(v), line(at)});
  };
  auto last_type = [&]() -> const T* { return tokens.empty() ? nullptr : &tokens.back().type; };
  auto strip_trailing = [&] {
    if (!tokens.empty() && tokens.back().type == T::kText) {
      tokens.back().value = js_trim_end(tokens.back().value);
      if (tokens.back().value.empty()) tokens.pop_back();
    }
  };
  auto skip_leading = [&] {
    while (size_t k = js_space_at(s, pos)) pos += k;
  };
  // consumeWhile of the reference, with its escapes (only strings hold backslashes).
  auto consume_while = [&](auto pred) {
    std::string out;
    while (pos < n && pred(s[pos])) {
      if (s[pos] == '\\') {
        ++pos;
        if (pos >= n) fail("unexpected end of input after '\\'");
        const char e = s[pos++];
        if (e == 'x' || e == 'u') {
          const size_t len = e == 'x' ? 2 : 4;
          const std::string hex = s.substr(pos, len);
          bool ok = hex.size() == len;
          for (char h : hex) ok = ok && isxdigit(static_cast<unsigned char>(h));
          if (!ok) fail(absl::StrCat("invalid escape sequence \\", std::string(1, e), hex));
          append_utf8(static_cast<uint32_t>(std::stoul(hex, nullptr, 16)), &out);
          pos += len;
          continue;
        }
        const char* map = "n\nt\tr\rb\bf\fv\v''\"\"\\\\";
        bool found = false;
        for (const char* m = map; *m; m += 2) {
          if (*m == e) {
            out += m[1];
            found = true;
            break;
          }
        }
        if (!found) fail(absl::StrCat("unexpected escaped character \\", std::string(1, e)));
        continue;
      }
      out += s[pos++];
      if (pos >= n) fail("unexpected end of input (a string or tag is not closed)");
    }
    return out;
  };
  while (pos < n) {
    const T* lt = last_type();
    if (lt == nullptr || *lt == T::kCloseStmt || *lt == T::kCloseExpr || *lt == T::kComment) {
      const size_t start = pos;
      while (pos < n && !(s[pos] == '{' && pos + 1 < n &&
                          (s[pos + 1] == '%' || s[pos + 1] == '{' || s[pos + 1] == '#'))) {
        ++pos;
      }
      if (pos > start) {
        push(T::kText, s.substr(start, pos - start), start);
        continue;
      }
    }
    if (starts(s, pos, "{#")) {
      const size_t start = pos;
      pos += 2;
      const bool strip_before = pos < n && s[pos] == '-';
      pos += strip_before;
      std::string comment;
      while (!(pos + 1 < n && s[pos] == '#' && s[pos + 1] == '}')) {
        if (pos + 2 >= n) throw Error(line(start), "a comment {# is not closed with #}");
        comment += s[pos++];
      }
      const bool strip_after = !comment.empty() && comment.back() == '-';
      if (strip_before) strip_trailing();
      push(T::kComment, comment, start);
      pos += 2;
      if (strip_after) skip_leading();
      continue;
    }
    if (starts(s, pos, "{%-")) {
      strip_trailing();
      push(T::kOpenStmt, "{%", pos);
      pos += 3;
      continue;
    }
    if (starts(s, pos, "{{-")) {
      strip_trailing();
      push(T::kOpenExpr, "{{", pos);
      curly = 0;
      pos += 3;
      continue;
    }
    skip_leading();  // whitespace inside a tag
    if (pos >= n) break;
    if (starts(s, pos, "-%}")) {
      push(T::kCloseStmt, "%}", pos);
      pos += 3;
      skip_leading();
      continue;
    }
    if (starts(s, pos, "-}}")) {
      push(T::kCloseExpr, "}}", pos);
      pos += 3;
      skip_leading();
      continue;
    }
    const char c = s[pos];
    if (c == '-' || c == '+') {
      lt = last_type();
      if (lt == nullptr || *lt == T::kText)
        fail(absl::StrCat("unexpected character '", std::string(1, c), "'"));
      const bool binary =
          *lt == T::kName || *lt == T::kNumber || *lt == T::kString ||
          (*lt == T::kOp && (tokens.back().value == ")" || tokens.back().value == "]"));
      if (!binary) {
        const size_t start = pos++;
        std::string num = consume_while(is_digit);
        if (!num.empty() && pos + 1 < n && s[pos] == '.' && is_digit(s[pos + 1])) {
          ++pos;
          num += "." + consume_while(is_digit);
        }
        if (num.empty()) {
          push(T::kOp, std::string(1, c), start);
          tokens.back().value = c == '-' ? "u-" : "u+";
        } else {
          push(T::kNumber, std::string(1, c) + num, start);
        }
        continue;
      }
    }
    bool matched = false;
    for (const char* op : kOps) {
      if (curly > 0 && std::string(op) == "}}") continue;
      if (!starts(s, pos, op)) continue;
      const std::string o(op);
      const T type = o == "{%"   ? T::kOpenStmt
                     : o == "%}" ? T::kCloseStmt
                     : o == "{{" ? T::kOpenExpr
                     : o == "}}" ? T::kCloseExpr
                                 : T::kOp;
      push(type, o, pos);
      if (type == T::kOpenExpr) curly = 0;
      if (o == "{") ++curly;
      if (o == "}") --curly;
      pos += o.size();
      matched = true;
      break;
    }
    if (matched) continue;
    if (c == '\'' || c == '"') {
      const size_t start = pos++;
      std::string str = consume_while([c](char x) { return x != c; });
      push(T::kString, std::move(str), start);
      ++pos;
      continue;
    }
    if (is_digit(c)) {
      const size_t start = pos;
      std::string num = consume_while(is_digit);
      const bool after_dot =
          !tokens.empty() && tokens.back().type == T::kOp && tokens.back().value == ".";
      if (!after_dot && pos + 1 < n && s[pos] == '.' && is_digit(s[pos + 1])) {
        ++pos;
        num += "." + consume_while(is_digit);
      }
      push(T::kNumber, std::move(num), start);
      continue;
    }
    if (is_word(c)) {
      const size_t start = pos;
      push(T::kName, consume_while(is_word), start);
      continue;
    }
    fail(absl::StrCat("unexpected character '", std::string(1, c), "'"));
  }
  return tokens;
}

}  // namespace anvil::io::jinja
