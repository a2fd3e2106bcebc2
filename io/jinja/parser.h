// Jinja parser (io/jinja/ast.h): tokens -> statements, with @huggingface/jinja's operator
// precedence (lowest first): `x if c else y`, or, and, not, comparisons and `in` / `not in`,
// `+ - ~`, `* / // %`, `**`, `is [not] test`, `| filter`, unary `- +`, calls / members /
// slices, literals. Statements: if / elif / else, for (with `if` filter and `else`), set (a name,
// a tuple, a namespace attribute, or a {% set x %}...{% endset %} block), break, continue.
// Anything else (macro, call, filter blocks, include, extends...) is an Error naming the
// construct and its line.
#pragma once

#include <vector>

#include "io/jinja/ast.h"
#include "io/jinja/lexer.h"

namespace anvil::io::jinja {

std::vector<NodePtr> parse(const std::vector<Token>& tokens);

}  // namespace anvil::io::jinja
