// A Jinja subset for chat templates (tokenizer_config.json's `chat_template`), rendering as
// @huggingface/jinja does (transformers' apply_chat_template settings: trim_blocks and
// lstrip_blocks). Large enough for the templates of Llama 3/3.1, Qwen 2/2.5/3, Gemma and Mistral
// (v0.1, v0.3, NeMo):
//   {{ expr }}, {# comments #}, {% if / elif / else %}, {% for x in xs [if c] %} ... {% else %}
//   with loop.index0 / index / first / last / length / revindex, {% set %} (names, tuples,
//   namespace attributes, {% set x %}...{% endset %}), {% break %} / {% continue %},
//   whitespace control ({%- -%} {{- -}}), literals (strings, integers, floats, true/false/none,
//   lists, dicts), `+ - * / // % **`, `~`, comparisons, and/or/not, [not] in, `x if c else y`,
//   indexing and slicing (messages[1:], xs[::-1]), tests (`is [not]` defined, none, string,
//   number, integer, boolean, iterable, mapping, sequence, true, false...), filters (trim,
//   length, tojson, upper, lower, title, capitalize, first, last, default, items, keys, values,
//   string, join, replace, list, reverse, unique, indent, int, float, abs, safe, selectattr and
//   rejectattr with a test such as equalto), methods (strip, lstrip, rstrip, split, startswith,
//   endswith, replace, upper, lower, get, items, keys, values) and globals (namespace(),
//   raise_exception(), range(), strftime_now()).
// Anything else (macros, call blocks, includes...) is an error naming the construct and its line.
// Error messages read "line N: ..."; a template's raise_exception("m") gives
// "line N: raise_exception(): m".
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/jinja/ast.h"
#include "nlohmann/json.hpp"

namespace anvil::io::jinja {

class Template {
 public:
  // InvalidArgument "line N: ..." for a syntax error or an unsupported statement.
  static absl::StatusOr<Template> parse(const std::string& source);
  // `context`: a JSON object of the variables (e.g. {"messages": [...], "add_generation_prompt":
  // true, "bos_token": "<s>"}); keys keep their order (tojson prints them so). InvalidArgument
  // "line N: ..." when rendering fails.
  absl::StatusOr<std::string> render(const nlohmann::ordered_json& context) const;

 private:
  std::shared_ptr<const std::vector<NodePtr>> program_;
};

// A JSON value as a template value (integral numbers are integers, as in JavaScript).
Value from_json(const nlohmann::ordered_json& j);

}  // namespace anvil::io::jinja
