// Renders a parsed Jinja template (io/jinja/ast.h) with @huggingface/jinja's semantics: scopes
// (a `for` body has its own; `if` does not), loop.index0/index/first/last/length/revindex...,
// short-circuit and/or, JavaScript-like == and string concatenation, none/undefined printing
// nothing. Throws jinja::Error with the line of the failing node.
#pragma once

#include <string>
#include <vector>

#include "io/jinja/ast.h"
#include "io/jinja/value.h"

namespace anvil::io::jinja {

// `context`: the template's variables (messages, add_generation_prompt, bos_token...), on top of
// the globals (io/jinja/builtins.h).
std::string render(const std::vector<NodePtr>& program, const Dict& context);

}  // namespace anvil::io::jinja
