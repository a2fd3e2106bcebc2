// Tokens of a Jinja template, as @huggingface/jinja's lexer makes them (the reference of
// bin/serve's chat templates): the template is first preprocessed as transformers'
// apply_chat_template configures Jinja (trim_blocks, lstrip_blocks, one trailing newline
// dropped, {% generation %} tags removed), then split into text and the tokens of {{ }} / {% %};
// `{%-`, `-%}`, `{{-`, `-}}` strip the whitespace next to them. Every token keeps its line in the
// original template for error messages.
#pragma once

#include <string>
#include <vector>

namespace anvil::io::jinja {

struct Token {
  enum class Type {
    kText,
    kNumber,
    kString,
    kName,
    kOp,
    kOpenStmt,
    kCloseStmt,
    kOpenExpr,
    kCloseExpr,
    kComment
  };
  Type type;
  std::string value;  // text, literal (unescaped), name or operator ("(", "==", "not in"...)
  int line = 1;
};

// Throws jinja::Error naming the line on a malformed template (unterminated string or comment,
// a bad escape, an unexpected character).
std::vector<Token> tokenize(const std::string& source);

// JavaScript's \s at s[i] (a UTF-8 sequence): its length in bytes, or 0.
size_t js_space_at(const std::string& s, size_t i);
// JavaScript's String.prototype.trimStart / trimEnd / trim (Unicode whitespace).
std::string js_trim_start(const std::string& s);
std::string js_trim_end(const std::string& s);
inline std::string js_trim(const std::string& s) { return js_trim_start(js_trim_end(s)); }

}  // namespace anvil::io::jinja
