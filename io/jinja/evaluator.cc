// Jinja evaluator (io/jinja/evaluator.h), a port of @huggingface/jinja's Interpreter.
#include "io/jinja/evaluator.h"

#include <cmath>
#include <cstdlib>
#include <memory>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "io/jinja/builtins.h"

namespace anvil::io::jinja {
namespace {

using K = Node::Kind;
using VK = Value::Kind;

struct BreakSignal {};
struct ContinueSignal {};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  const Scope* parent = nullptr;
  Value lookup(const std::string& name) const {
    for (const Scope* s = this; s != nullptr; s = s->parent) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return it->second;
    }
    return Value();
  }
};

// JavaScript's Number(string) for ==.
double js_to_number(const std::string& s) {
  const std::string t = s;
  size_t b = 0, e = t.size();
  while (b < e && (t[b] == ' ' || t[b] == '\t' || t[b] == '\n' || t[b] == '\r')) ++b;
  while (e > b && (t[e - 1] == ' ' || t[e - 1] == '\t' || t[e - 1] == '\n' || t[e - 1] == '\r'))
    --e;
  if (b == e) return 0;
  const std::string u = t.substr(b, e - b);
  char* end = nullptr;
  const double v = std::strtod(u.c_str(), &end);
  return end == u.c_str() + u.size() ? v : std::nan("");
}

// JavaScript's == of the two values' payloads, as the reference compares them.
bool loose_equal(const Value& a, const Value& b) {
  const bool a_nil = a.is(VK::kNone) || a.is(VK::kUndefined);
  const bool b_nil = b.is(VK::kNone) || b.is(VK::kUndefined);
  if (a_nil || b_nil) return a_nil && b_nil;
  auto primitive = [](const Value& v) {
    return v.is_number() || v.is(VK::kBool) || v.is(VK::kString);
  };
  if (!primitive(a) || !primitive(b)) return a.same(b);
  if (a.is(VK::kString) && b.is(VK::kString)) return a.s() == b.s();
  auto num = [](const Value& v) {
    return v.is(VK::kString) ? js_to_number(v.s())
           : v.is(VK::kBool) ? (v.b() ? 1.0 : 0.0)
                             : v.number();
  };
  return num(a) == num(b);
}

// JavaScript's === of the payloads (membership in a list).
bool strict_equal(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.number() == b.number();
  return a.same(b);
}

class Evaluator {
 public:
  std::string block(const std::vector<NodePtr>& nodes, Scope& scope) {
    std::string out;
    for (const NodePtr& n : nodes) statement(*n, scope, &out);
    return out;
  }

 private:
  void statement(const Node& n, Scope& scope, std::string* out) {
    try {
      switch (n.kind) {
        case K::kText:
          *out += n.str;
          return;
        case K::kOutput: {
          const Value v = eval(*n.kids[0], scope);
          if (!v.is(VK::kNone) && !v.is(VK::kUndefined)) *out += v.str();
          return;
        }
        case K::kIf:
          *out += block(eval(*n.kids[0], scope).truthy() ? n.body : n.alt, scope);
          return;
        case K::kFor:
          for_loop(n, scope, out);
          return;
        case K::kSet:
          set(n, scope);
          return;
        case K::kBreak:
          throw BreakSignal{};
        case K::kContinue:
          throw ContinueSignal{};
        default:
          *out += eval(n, scope).str();
      }
    } catch (const Error& e) {
      if (e.line() == 0) throw Error(n.line, e.what());
      throw;
    }
  }

  void assign(const Node& target, const Value& v, Scope& scope) {
    if (target.kind == K::kName) {
      scope.vars[target.str] = v;
    } else if (target.kind == K::kTuple) {
      if (!v.is(VK::kList))
        throw Error(target.line, absl::StrCat("cannot unpack a ", v.type_name()));
      if (v.items().size() != target.kids.size()) {
        throw Error(target.line,
                    absl::StrCat("too ", target.kids.size() > v.items().size() ? "few" : "many",
                                 " items to unpack (", v.items().size(), " for ",
                                 target.kids.size(), " names)"));
      }
      for (size_t i = 0; i < target.kids.size(); ++i) {
        if (target.kids[i]->kind != K::kName)
          throw Error(target.line, "can only unpack into names");
        scope.vars[target.kids[i]->str] = v.items()[i];
      }
    } else {
      throw Error(target.line, "invalid assignment target");
    }
  }

  void set(const Node& n, Scope& scope) {
    const Value v = n.kids[1] ? eval(*n.kids[1], scope) : Value::string(block(n.body, scope));
    const Node& target = *n.kids[0];
    if (target.kind == K::kMember) {
      const Value obj = eval(*target.kids[0], scope);
      if (!obj.is(VK::kNamespace)) {
        throw Error(n.line, absl::StrCat("cannot set an attribute of a ", obj.type_name(),
                                         " (only of a namespace())"));
      }
      const Node& key = *target.kids[1];
      if (key.kind != K::kLiteral || !key.value.is(VK::kString)) {
        throw Error(n.line, "a namespace attribute is set by name (ns.name)");
      }
      obj.entries().set(key.value.s(), v);
      return;
    }
    assign(target, v, scope);
  }

  void for_loop(const Node& n, Scope& scope, std::string* out) {
    Scope loop_scope;
    loop_scope.parent = &scope;
    Value iterable = eval(*n.kids[1], loop_scope);
    List items;
    if (iterable.is(VK::kList)) {
      items = iterable.items();
    } else if (iterable.is(VK::kDict)) {
      for (const auto& kv : iterable.entries().items) items.push_back(Value::string(kv.first));
    } else {
      throw Error(n.line,
                  absl::StrCat("'for' needs a list or a dict, got a ", iterable.type_name()));
    }
    if (n.kids[2]) {  // for x in xs if cond
      List kept;
      for (const Value& x : items) {
        Scope test_scope;
        test_scope.parent = &loop_scope;
        assign(*n.kids[0], x, test_scope);
        if (eval(*n.kids[2], test_scope).truthy()) kept.push_back(x);
      }
      items = std::move(kept);
    }
    const int64_t len = static_cast<int64_t>(items.size());
    bool iterated = false;
    for (int64_t i = 0; i < len; ++i) {
      Dict loop;
      loop.set("index", Value::integer(i + 1));
      loop.set("index0", Value::integer(i));
      loop.set("revindex", Value::integer(len - i));
      loop.set("revindex0", Value::integer(len - i - 1));
      loop.set("first", Value::boolean(i == 0));
      loop.set("last", Value::boolean(i == len - 1));
      loop.set("length", Value::integer(len));
      loop.set("previtem", i > 0 ? items[i - 1] : Value());
      loop.set("nextitem", i < len - 1 ? items[i + 1] : Value());
      loop_scope.vars["loop"] = Value::dict(std::move(loop));
      assign(*n.kids[0], items[i], loop_scope);
      try {
        *out += block(n.body, loop_scope);
      } catch (const ContinueSignal&) {
        continue;
      } catch (const BreakSignal&) {
        break;
      }
      iterated = true;
    }
    if (!iterated) *out += block(n.alt, loop_scope);
  }

  Args arguments(const Node& n, size_t first, Scope& scope) {
    Args a;
    for (size_t i = first; i < n.kids.size(); ++i) {
      if (n.kids[i]->kind != K::kKwarg) a.pos.push_back(eval(*n.kids[i], scope));
    }
    for (size_t i = first; i < n.kids.size(); ++i) {
      const Node& k = *n.kids[i];
      if (k.kind != K::kKwarg) continue;
      if (a.kwarg(k.str)) throw Error(k.line, "keyword argument '" + k.str + "' given twice");
      a.kw.emplace_back(k.str, eval(*k.kids[0], scope));
    }
    return a;
  }

  Value eval(const Node& n, Scope& scope) {
    try {
      return eval_inner(n, scope);
    } catch (const Error& e) {
      if (e.line() == 0) throw Error(n.line, e.what());
      throw;
    }
  }

  Value eval_inner(const Node& n, Scope& scope) {
    switch (n.kind) {
      case K::kLiteral:
        return n.value;
      case K::kName:
        return scope.lookup(n.str);
      case K::kList:
      case K::kTuple: {
        List l;
        for (const NodePtr& k : n.kids) l.push_back(eval(*k, scope));
        return Value::list(std::move(l));
      }
      case K::kDict: {
        Dict d;
        for (size_t i = 0; i + 1 < n.kids.size(); i += 2) {
          const Value key = eval(*n.kids[i], scope);
          if (!key.is(VK::kString)) {
            throw Error(n.line, absl::StrCat("dict keys must be strings, got a ", key.type_name()));
          }
          d.set(key.s(), eval(*n.kids[i + 1], scope));
        }
        return Value::dict(std::move(d));
      }
      case K::kMember:
        return member(eval(*n.kids[0], scope), eval(*n.kids[1], scope));
      case K::kSlice: {
        auto part = [&](int i) { return n.kids[i] ? eval(*n.kids[i], scope) : Value(); };
        return slice(eval(*n.kids[0], scope), part(1), part(2), part(3));
      }
      case K::kCall: {
        const Args a = arguments(n, 1, scope);
        const Value fn = eval(*n.kids[0], scope);
        if (!fn.is(VK::kFunction)) {
          throw Error(n.line, absl::StrCat("cannot call a ", fn.type_name(),
                                           callee_name(*n.kids[0]), " (not a function)"));
        }
        return fn.fn()(a);
      }
      case K::kFilter: {
        const Value operand = eval(*n.kids[0], scope);
        if (n.str == "selectattr" || n.str == "rejectattr") {
          // The reference takes string literals only here (not names, not keywords).
          for (size_t i = 1; i < n.kids.size(); ++i) {
            const Node& k = *n.kids[i];
            if (k.kind != K::kLiteral || !k.value.is(VK::kString)) {
              throw Error(k.line, "the arguments of '" + n.str + "' must be string literals");
            }
          }
        }
        return apply_filter(n.str, operand, n.has_args, arguments(n, 1, scope));
      }
      case K::kTest: {
        const bool r = apply_test(n.str, eval(*n.kids[0], scope));
        return Value::boolean(n.negate ? !r : r);
      }
      case K::kUnary: {
        const Value v = eval(*n.kids[0], scope);
        if (n.str == "not") return Value::boolean(!v.truthy());
        const int sign = n.str == "-" ? -1 : 1;
        if (v.is(VK::kInt)) return Value::integer(sign * v.i());
        if (v.is(VK::kBool)) return Value::integer(sign * static_cast<int64_t>(v.b()));
        if (v.is(VK::kFloat)) return Value::floating(sign * v.f());
        throw Error(n.line,
                    absl::StrCat("unary '", n.str, "' needs a number, got a ", v.type_name()));
      }
      case K::kTernary: {
        if (eval(*n.kids[0], scope).truthy()) return eval(*n.kids[1], scope);
        return n.kids[2] ? eval(*n.kids[2], scope) : Value();
      }
      case K::kBinary:
        return binary(n, scope);
      default:
        throw Error(n.line, "a statement where an expression was expected");
    }
  }

  static std::string callee_name(const Node& c) {
    if (c.kind == K::kName) return " ('" + c.str + "')";
    if (c.kind == K::kMember && c.kids[1]->kind == K::kLiteral &&
        c.kids[1]->value.is(VK::kString)) {
      return " ('." + c.kids[1]->value.s() + "')";
    }
    return "";
  }

  Value binary(const Node& n, Scope& scope) {
    const std::string& op = n.str;
    const Value a = eval(*n.kids[0], scope);
    if (op == "and") return a.truthy() ? eval(*n.kids[1], scope) : a;
    if (op == "or") return a.truthy() ? a : eval(*n.kids[1], scope);
    const Value b = eval(*n.kids[1], scope);
    if (op == "==") return Value::boolean(loose_equal(a, b));
    if (op == "!=") return Value::boolean(!loose_equal(a, b));
    const bool in = op == "in" || op == "not in";
    auto result = [&](bool member) { return Value::boolean(op == "in" ? member : !member); };
    if (a.is(VK::kUndefined) || b.is(VK::kUndefined)) {
      if (b.is(VK::kUndefined) && in) return result(false);
      throw Error(n.line, absl::StrCat("'", op, "' on an undefined value"));
    }
    if (a.is(VK::kNone) || b.is(VK::kNone)) {
      throw Error(n.line, absl::StrCat("'", op, "' on a none value"));
    }
    if (op == "~") return Value::string(a.concat_text() + b.concat_text());
    auto numeric = [](const Value& v) { return v.is_number() || v.is(VK::kBool); };
    if (op == "**" && numeric(a) && numeric(b)) {
      const double x = a.is(VK::kBool) ? a.b() : a.number();
      const double y = b.is(VK::kBool) ? b.b() : b.number();
      const double r = std::pow(x, y);
      if (!std::isfinite(r)) throw Error(n.line, "'**' gives a number that is not finite");
      if (a.is(VK::kFloat) || b.is(VK::kFloat) || y < 0) return Value::floating(r);
      return Value::integer(static_cast<int64_t>(r));
    }
    if (a.is_number() && b.is_number()) {
      const bool fl = a.is(VK::kFloat) || b.is(VK::kFloat);
      const double x = a.number(), y = b.number();
      auto num = [&](double r) {
        return fl || !std::isfinite(r) ? Value::floating(r)
                                       : Value::integer(static_cast<int64_t>(r));
      };
      if (op == "+") return fl ? Value::floating(x + y) : Value::integer(a.i() + b.i());
      if (op == "-") return fl ? Value::floating(x - y) : Value::integer(a.i() - b.i());
      if (op == "*") return fl ? Value::floating(x * y) : Value::integer(a.i() * b.i());
      if (op == "/") return Value::floating(x / y);
      if (op == "//") return num(std::floor(x / y));
      if (op == "%") return num(std::fmod(x, y));
      if (op == "<") return Value::boolean(x < y);
      if (op == ">") return Value::boolean(x > y);
      if (op == "<=") return Value::boolean(x <= y);
      if (op == ">=") return Value::boolean(x >= y);
    } else if (a.is(VK::kList) && b.is(VK::kList)) {
      if (op == "+") {
        List l = a.items();
        l.insert(l.end(), b.items().begin(), b.items().end());
        return Value::list(std::move(l));
      }
    } else if (b.is(VK::kList) && in) {
      bool found = false;
      for (const Value& x : b.items()) found = found || strict_equal(x, a);
      return result(found);
    }
    if ((a.is(VK::kString) || b.is(VK::kString)) && op == "+") {
      return Value::string(a.concat_text() + b.concat_text());
    }
    if (a.is(VK::kString) && b.is(VK::kString) && in) {
      return result(b.s().find(a.s()) != std::string::npos);
    }
    if (a.is(VK::kString) && b.is(VK::kDict) && in) {
      return result(b.entries().find(a.s()) != nullptr);
    }
    throw Error(n.line, absl::StrCat("the operator '", op, "' does not apply to a ", a.type_name(),
                                     " and a ", b.type_name()));
  }
};

}  // namespace

std::string render(const std::vector<NodePtr>& program, const Dict& context) {
  Scope globals;
  for (auto& [k, v] : jinja::globals().items) globals.vars[k] = v;
  for (const auto& [k, v] : context.items) globals.vars[k] = v;
  Evaluator e;
  try {
    return e.block(program, globals);
  } catch (const BreakSignal&) {
    throw Error(0, "'{% break %}' outside a loop");
  } catch (const ContinueSignal&) {
    throw Error(0, "'{% continue %}' outside a loop");
  }
}

}  // namespace anvil::io::jinja
