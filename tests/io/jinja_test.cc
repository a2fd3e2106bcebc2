// io/jinja's constructs and error messages. Expected texts follow Jinja's documented semantics
// as @huggingface/jinja implements them (checked against it by hand with
// `node scripts/jinja_reference.js render`).
#include <string>

#include "gtest/gtest.h"
#include "io/jinja/template.h"
#include "nlohmann/json.hpp"

namespace anvil::io::jinja {
namespace {

using json = nlohmann::ordered_json;

std::string render(const std::string& src, const json& ctx = json::object()) {
  absl::StatusOr<Template> t = Template::parse(src);
  if (!t.ok()) return "PARSE ERROR: " + std::string(t.status().message());
  absl::StatusOr<std::string> out = t->render(ctx);
  if (!out.ok()) return "ERROR: " + std::string(out.status().message());
  return *out;
}

TEST(Jinja, OutputsLiteralsAndOperators) {
  EXPECT_EQ(render("a{{ 'b' ~ 1 ~ true }}c"), "ab1truec");
  EXPECT_EQ(render("{{ 1 + 2 * 3 }} {{ 7 // 2 }} {{ 7 % 3 }} {{ 2 ** 10 }} {{ 1 / 2 }}"),
            "7 3 1 1024 0.5");
  EXPECT_EQ(render("{{ 2.0 }} {{ -3 }} {{ none }}{{ undefined_name }}|"), "2.0 -3 |");
  EXPECT_EQ(render("{{ [1, 'a', [true]] }} {{ {'k': 'v', 'n': none} }}"),
            "[1, \"a\", [true]] {\"k\": \"v\", \"n\": null}");
  EXPECT_EQ(render("{{ 'x' if 1 > 2 else 'y' }}{{ 'z' if false }}"), "y");
  EXPECT_EQ(render("{{ 'ab' in 'cabd' }} {{ 3 not in [1, 2] }} {{ 'k' in {'k': 1} }}"),
            "true true true");
  EXPECT_EQ(render("{{ not 0 and 'yes' }} {{ '' or 'fallback' }}"), "yes fallback");
}

TEST(Jinja, ControlFlowAndLoop) {
  const std::string src =
      "{% for x in xs %}{{ loop.index0 }}{{ loop.index }}{{ loop.first }}{{ loop.last }}"
      "{{ loop.length }}:{{ x }};{% endfor %}";
  EXPECT_EQ(render(src, {{"xs", {"a", "b"}}}), "01truefalse2:a;12falsetrue2:b;");
  EXPECT_EQ(render("{% for x in [] %}x{% else %}empty{% endfor %}"), "empty");
  EXPECT_EQ(render("{% for x in [1,2,3,4] if x is even %}{{ x }}{% endfor %}"), "24");
  EXPECT_EQ(render("{% for x in [1,2,3] %}{% if x == 2 %}{% continue %}{% endif %}{{ x }}"
                   "{% if x == 3 %}{% break %}{% endif %}{% endfor %}"),
            "1");  // the reference drops a broken iteration's output
  EXPECT_EQ(render("{% if a %}A{% elif b %}B{% else %}C{% endif %}", {{"b", 1}}), "B");
  EXPECT_EQ(render("{% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}",
                   {{"d", {{"x", 1}, {"y", "z"}}}}),
            "x=1 y=z ");
}

TEST(Jinja, SetScopesAndNamespaces) {
  EXPECT_EQ(render("{% set x = 1 %}{% for i in [1] %}{% set x = 2 %}{% endfor %}{{ x }}"), "1");
  EXPECT_EQ(render("{% set ns = namespace(x=1) %}{% for i in [1,2] %}{% set ns.x = ns.x + i %}"
                   "{% endfor %}{{ ns.x }}"),
            "4");
  EXPECT_EQ(render("{% set a, b = [1, 2] %}{{ b }}{{ a }}"), "21");
  EXPECT_EQ(render("{% set t %}in {{ 1 }}{% endset %}[{{ t }}]"), "[in 1]");
}

TEST(Jinja, WhitespaceControlAndBlocks) {
  EXPECT_EQ(render("a  {%- if true -%}  b  {%- endif -%}  c"), "abc");
  EXPECT_EQ(render("a {{- 'b' -}} c"), "abc");
  // trim_blocks and lstrip_blocks, as transformers configures Jinja.
  EXPECT_EQ(render("{% if true %}\n    x\n    {% endif %}\ny\n"), "    x\ny");
  EXPECT_EQ(render("a{# comment #}b"), "ab");
}

TEST(Jinja, FiltersTestsMethodsSlices) {
  const json ctx = {{"s", "  Hi There  "}, {"xs", {1, 2, 3}}};
  EXPECT_EQ(render("[{{ s | trim }}] {{ s | length }} {{ s | upper }} {{ s | lower }}", ctx),
            "[Hi There] 12   HI THERE     hi there  ");
  EXPECT_EQ(render("{{ xs | first }}{{ xs | last }}{{ xs | length }}{{ xs | join('-') }}", ctx),
            "133"
            "1-2-3");
  EXPECT_EQ(render("{{ xs[1:] }} {{ xs[::-1] }} {{ xs[-1] }} {{ 'abc'[1:] }}", ctx),
            "[2, 3] [3, 2, 1] 3 bc");
  EXPECT_EQ(render("{{ missing | default('d') }} {{ {'a': [1, 'x']} | tojson }}"),
            "d {\"a\": [1, \"x\"]}");
  EXPECT_EQ(
      render("{{ 'a,b,c'.split(',')[1] }} {{ 'x  y '.split() | length }} "
             "{{ ' t '.strip() }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x','c')) }}"),
      "b 2 t true true");
  EXPECT_EQ(render("{{ 'aaa' | replace('a', 'b') }} {{ 'aaa'.replace('a', 'b', 2) }}"), "bbb bba");
  EXPECT_EQ(render("{{ x is defined }} {{ x is not defined }} {{ none is none }} "
                   "{{ 's' is string }} {{ 1 is number }} {{ [] is iterable }}"),
            "false true true true true true");
  EXPECT_EQ(
      render("{{ d.get('a') }}{{ d.get('z', 'no') }}{{ d['a'] }}{{ d.a }}", {{"d", {{"a", "A"}}}}),
      "AnoAA");
}

// Mistral NeMo's template filters messages with selectattr / rejectattr; the expected texts are
// @huggingface/jinja 0.5.11's, including its departure from Python's Jinja: an item lacking the
// attribute fails every test, so selectattr('tool_calls', 'undefined') keeps nothing.
TEST(Jinja, SelectattrAndRejectattr) {
  const json ctx = {{"ms",
                     {{{"role", "user"}, {"content", "a"}},
                      {{"role", "assistant"}, {"content", ""}, {"tool_calls", {1}}},
                      {{"role", "user"}, {"content", "b"}},
                      {{"role", "tool"}, {"content", "c"}, {"n", nullptr}}}}};
  EXPECT_EQ(render("{% for m in ms | selectattr('role', 'equalto', 'user') %}{{ m.content }}"
                   "{% endfor %}",
                   ctx),
            "ab");
  EXPECT_EQ(
      render("{% for m in ms | rejectattr('role', 'eq', 'user') %}{{ m.role }};{% endfor %}", ctx),
      "assistant;tool;");
  EXPECT_EQ(render("{% for m in ms | selectattr('content') %}{{ m.role }};{% endfor %}", ctx),
            "user;user;tool;");
  EXPECT_EQ(render("{% for m in ms | selectattr('tool_calls', 'undefined') %}{{ m.role }};"
                   "{% endfor %}|",
                   ctx),
            "|");
  EXPECT_EQ(render("{% for m in ms | rejectattr('tool_calls', 'undefined') %}{{ m.role }};"
                   "{% endfor %}|",
                   ctx),
            "user;assistant;user;tool;|");
  EXPECT_EQ(render("{{ ms | selectattr('tool_calls', 'defined') | length }}"
                   "{{ ms | selectattr('n', 'none') | length }}",
                   ctx),
            "11");
  // Items keep their identity: == compares dicts as the reference does, by identity.
  EXPECT_EQ(render("{% set u = ms | selectattr('role', 'equalto', 'user') | list %}"
                   "{{ u[-1] == ms[2] }} {{ u[-1] == ms[0] }}",
                   ctx),
            "true false");
  EXPECT_EQ(render("{% set r = 'role' %}{{ ms | selectattr(r, 'equalto', 'user') }}", ctx),
            "ERROR: line 1: the arguments of 'selectattr' must be string literals");
  EXPECT_EQ(render("{{ ms | selectattr('role', 'equalto') }}", ctx),
            "ERROR: line 1: the test 'equalto' needs a value to compare");
  EXPECT_EQ(render("{{ [1, 2] | selectattr('role') }}"),
            "ERROR: line 1: selectattr() applies to a list of dicts, not to one holding a integer");
  EXPECT_EQ(render("{{ ms | selectattr('role', 'nosuch', 'x') }}", ctx).substr(0, 41),
            "ERROR: line 1: the test 'nosuch' is not s");
}

TEST(Jinja, ErrorsNameTheConstructAndLine) {
  EXPECT_EQ(render("ok\n{% macro m() %}{% endmacro %}"),
            "PARSE ERROR: line 2: the statement '{% macro %}' is not supported (supported: if, "
            "for, set, break, continue)");
  EXPECT_EQ(render("{% if x %}\nno end"),
            "PARSE ERROR: line 1: '{% if %}' is not closed (expected {% endif %})");
  EXPECT_EQ(render("\n\n{{ 'unterminated }}"),
            "PARSE ERROR: line 3: unexpected end of input (a string or tag is not closed)");
  EXPECT_EQ(render("{{ x | frobnicate }}").substr(0, 53),
            "ERROR: line 1: the filter 'frobnicate' is not support");
  EXPECT_EQ(render("a\n{{ raise_exception('roles must alternate') }}"),
            "ERROR: line 2: raise_exception(): roles must alternate");
  EXPECT_EQ(render("{{ 1 - 'a' }}"),
            "ERROR: line 1: the operator '-' does not apply to a integer and a string");
  EXPECT_EQ(render("{{ x.strip() }}"),
            "ERROR: line 1: cannot call a undefined ('.strip') (not a function)");
  EXPECT_EQ(render("{% for x in 3 %}{% endfor %}"),
            "ERROR: line 1: 'for' needs a list or a dict, got a integer");
  EXPECT_EQ(render("{{ x is divisibleby }}").substr(0, 44),
            "ERROR: line 1: the test 'divisibleby' is not");
}

}  // namespace
}  // namespace anvil::io::jinja
