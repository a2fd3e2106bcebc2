// The syntax tree of a parsed Jinja template (io/jinja/parser.h), one node type with a kind:
// statements render text, expressions compute values (io/jinja/evaluator.h).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/jinja/value.h"

namespace anvil::io::jinja {

struct Node;
using NodePtr = std::unique_ptr<Node>;

struct Node {
  enum class Kind {
    // Statements.
    kText,    // str: the text
    kOutput,  // {{ kids[0] }}
    kIf,      // kids[0]: test; body; alt (elif: one kIf in alt)
    kFor,     // kids[0]: target (kName or kTuple); kids[1]: iterable; kids[2]: filter or null
    kSet,     // kids[0]: target (kName, kTuple or kMember); kids[1]: value, or null: body
    kBreak,
    kContinue,
    // Expressions.
    kLiteral,  // value
    kName,     // str
    kList,     // kids
    kTuple,    // kids
    kDict,     // kids: key, value, key, value...
    kMember,   // kids[0]: object; kids[1]: key (a[key], a.name: a string literal)
    kSlice,    // kids[0]: object; kids[1..3]: start, stop, step (null: absent)
    kCall,     // kids[0]: callee; kids[1..]: arguments (kKwarg for name=value)
    kKwarg,    // str: name; kids[0]: value
    kFilter,   // str: filter name; kids[0]: operand; kids[1..]: arguments (has_args: a call)
    kTest,     // str: test name; kids[0]: operand; negate
    kUnary,    // str: "not", "-" or "+"; kids[0]
    kBinary,   // str: operator; kids[0], kids[1]
    kTernary,  // kids[0]: condition, kids[1]: then, kids[2]: else (null: undefined)
  };
  Kind kind;
  int line = 0;
  std::string str;
  Value value;
  bool negate = false;
  bool has_args = false;
  std::vector<NodePtr> kids;
  std::vector<NodePtr> body, alt;
};

}  // namespace anvil::io::jinja
