// Jinja parser (io/jinja/parser.h): a recursive-descent port of @huggingface/jinja's parser.ts.
#include "io/jinja/parser.h"

#include <cstdlib>
#include <set>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace anvil::io::jinja {
namespace {

using T = Token::Type;
using K = Node::Kind;

class Parser {
 public:
  explicit Parser(const std::vector<Token>& t) : t_(t) {}

  std::vector<NodePtr> program() {
    std::vector<NodePtr> out;
    while (i_ < t_.size()) {
      if (NodePtr n = any()) out.push_back(std::move(n));
    }
    return out;
  }

 private:
  [[noreturn]] void fail(const std::string& m) const {
    throw Error(i_ < t_.size() ? t_[i_].line : (t_.empty() ? 1 : t_.back().line), m);
  }
  bool is(T type, const char* v = nullptr, size_t ahead = 0) const {
    const size_t k = i_ + ahead;
    return k < t_.size() && t_[k].type == type && (v == nullptr || t_[k].value == v);
  }
  bool is_name(const char* v, size_t ahead = 0) const { return is(T::kName, v, ahead); }
  bool is_op(const char* v) const { return is(T::kOp, v); }
  bool is_statement(const std::set<std::string>& names) const {
    return is(T::kOpenStmt) && i_ + 1 < t_.size() && t_[i_ + 1].type == T::kName &&
           names.count(t_[i_ + 1].value) > 0;
  }
  std::string describe() const {
    if (i_ >= t_.size()) return "the end of the template";
    const Token& k = t_[i_];
    switch (k.type) {
      case T::kText:
        return "text";
      case T::kString:
        return "a string";
      case T::kOpenStmt:
        return "'{%'";
      case T::kCloseStmt:
        return "'%}'";
      case T::kOpenExpr:
        return "'{{'";
      case T::kCloseExpr:
        return "'}}'";
      case T::kOp:
        return absl::StrCat("'", k.value == "u-" ? "-" : k.value == "u+" ? "+" : k.value, "'");
      default:
        return absl::StrCat("'", k.value, "'");
    }
  }
  void expect(T type, const char* v, const char* what) {
    if (!is(type, v)) fail(absl::StrCat("expected ", what, ", got ", describe()));
    ++i_;
  }
  NodePtr node(K kind, int line) {
    auto n = std::make_unique<Node>();
    n->kind = kind;
    n->line = line;
    return n;
  }
  int line() const { return i_ < t_.size() ? t_[i_].line : (t_.empty() ? 1 : t_.back().line); }

  // One statement, text or output; null for a comment.
  NodePtr any() {
    if (i_ >= t_.size()) fail("unexpected end of the template");
    const Token& k = t_[i_];
    switch (k.type) {
      case T::kComment:
        ++i_;
        return nullptr;
      case T::kText: {
        NodePtr n = node(K::kText, k.line);
        n->str = k.value;
        ++i_;
        return n;
      }
      case T::kOpenStmt:
        return statement();
      case T::kOpenExpr: {
        NodePtr n = node(K::kOutput, k.line);
        ++i_;
        n->kids.push_back(expression());
        expect(T::kCloseExpr, nullptr, "'}}' closing the expression");
        return n;
      }
      default:
        fail(absl::StrCat("unexpected ", describe(), " outside {{ }} and {% %}"));
    }
  }

  // Statements until one of `ends` opens (not consumed).
  std::vector<NodePtr> block(const std::set<std::string>& ends, const char* opened, int at) {
    std::vector<NodePtr> out;
    while (!is_statement(ends)) {
      if (i_ >= t_.size()) {
        throw Error(at, absl::StrCat("'{% ", opened, " %}' is not closed (expected {% ",
                                     *ends.rbegin(), " %})"));
      }
      if (NodePtr n = any()) out.push_back(std::move(n));
    }
    return out;
  }
  void end_tag(const char* name) {
    expect(T::kOpenStmt, nullptr, "'{%'");
    expect(T::kName, name, name);
    expect(T::kCloseStmt, nullptr, "'%}'");
  }

  NodePtr statement() {
    const int at = line();
    ++i_;  // {%
    if (!is(T::kName)) fail(absl::StrCat("expected a statement name after '{%', got ", describe()));
    const std::string name = t_[i_++].value;
    if (name == "if") return if_statement(at);
    if (name == "for") {
      NodePtr n = node(K::kFor, at);
      n->kids.push_back(sequence(/*primary=*/true));
      if (n->kids[0]->kind != K::kName && n->kids[0]->kind != K::kTuple) {
        fail("expected a name or a tuple of names as the loop variable");
      }
      if (!is_name("in"))
        fail(absl::StrCat("expected 'in' after the loop variable, got ", describe()));
      ++i_;
      NodePtr iterable = expression();
      if (iterable->kind == K::kTernary && iterable->kids[2] == nullptr) {  // for x in xs if c
        n->kids.push_back(std::move(iterable->kids[1]));
        n->kids.push_back(std::move(iterable->kids[0]));
      } else {
        n->kids.push_back(std::move(iterable));
        n->kids.push_back(nullptr);
      }
      expect(T::kCloseStmt, nullptr, "'%}'");
      n->body = block({"endfor", "else"}, "for", at);
      if (is_statement({"else"})) {
        i_ += 2;
        expect(T::kCloseStmt, nullptr, "'%}'");
        n->alt = block({"endfor"}, "for", at);
      }
      end_tag("endfor");
      return n;
    }
    if (name == "set") {
      NodePtr n = node(K::kSet, at);
      n->kids.push_back(sequence(false));
      const K target = n->kids[0]->kind;
      if (target != K::kName && target != K::kTuple && target != K::kMember) {
        fail("'set' assigns to a name, a tuple of names or a namespace attribute");
      }
      if (is_op("=")) {
        ++i_;
        n->kids.push_back(sequence(false));
        expect(T::kCloseStmt, nullptr, "'%}'");
      } else {
        expect(T::kCloseStmt, nullptr, "'=' or '%}' after the name of 'set'");
        n->kids.push_back(nullptr);
        n->body = block({"endset"}, "set", at);
        end_tag("endset");
      }
      return n;
    }
    if (name == "break" || name == "continue") {
      expect(T::kCloseStmt, nullptr, "'%}'");
      return node(name == "break" ? K::kBreak : K::kContinue, at);
    }
    throw Error(at, absl::StrCat("the statement '{% ", name,
                                 " %}' is not supported (supported: if, for, set, break, "
                                 "continue)"));
  }

  NodePtr if_statement(int at) {
    NodePtr n = node(K::kIf, at);
    n->kids.push_back(expression());
    expect(T::kCloseStmt, nullptr, "'%}' after the condition of 'if'");
    n->body = block({"elif", "else", "endif"}, "if", at);
    if (is_statement({"elif"})) {
      const int l = line();
      i_ += 2;
      n->alt.push_back(if_statement(l));  // consumes the endif
      return n;
    }
    if (is_statement({"else"})) {
      i_ += 2;
      expect(T::kCloseStmt, nullptr, "'%}'");
      n->alt = block({"endif"}, "if", at);
    }
    end_tag("endif");
    return n;
  }

  // a, b, c (a tuple) or a single expression.
  NodePtr sequence(bool primary) {
    const int at = line();
    NodePtr first = primary ? primary_expr() : expression();
    if (!is_op(",")) return first;
    NodePtr t = node(K::kTuple, at);
    t->kids.push_back(std::move(first));
    while (is_op(",")) {
      ++i_;
      t->kids.push_back(primary ? primary_expr() : expression());
    }
    return t;
  }

  NodePtr binary(std::string op, NodePtr a, NodePtr b, int at) {
    NodePtr n = node(K::kBinary, at);
    n->str = std::move(op);
    n->kids.push_back(std::move(a));
    n->kids.push_back(std::move(b));
    return n;
  }

  NodePtr expression() {
    const int at = line();
    NodePtr a = or_expr();
    if (!is_name("if")) return a;
    ++i_;
    NodePtr n = node(K::kTernary, at);
    n->kids.push_back(or_expr());
    n->kids.push_back(std::move(a));
    if (is_name("else")) {
      ++i_;
      n->kids.push_back(expression());
    } else {
      n->kids.push_back(nullptr);
    }
    return n;
  }
  NodePtr or_expr() {
    NodePtr a = and_expr();
    while (is_name("or")) {
      const int at = line();
      ++i_;
      a = binary("or", std::move(a), and_expr(), at);
    }
    return a;
  }
  NodePtr and_expr() {
    NodePtr a = not_expr();
    while (is_name("and")) {
      const int at = line();
      ++i_;
      a = binary("and", std::move(a), not_expr(), at);
    }
    return a;
  }
  NodePtr not_expr() {
    if (is_name("not")) {
      NodePtr n = node(K::kUnary, line());
      ++i_;
      n->str = "not";
      n->kids.push_back(not_expr());
      return n;
    }
    return comparison();
  }
  NodePtr comparison() {
    NodePtr a = additive();
    while (true) {
      const int at = line();
      std::string op;
      if (is_name("not") && is_name("in", 1)) {
        op = "not in";
        i_ += 2;
      } else if (is_name("in")) {
        op = "in";
        ++i_;
      } else if (is(T::kOp) &&
                 (t_[i_].value == "==" || t_[i_].value == "!=" || t_[i_].value == "<" ||
                  t_[i_].value == ">" || t_[i_].value == "<=" || t_[i_].value == ">=")) {
        op = t_[i_++].value;
      } else {
        return a;
      }
      a = binary(op, std::move(a), additive(), at);
    }
  }
  NodePtr additive() {
    NodePtr a = multiplicative();
    while (is_op("+") || is_op("-") || is_op("~")) {
      const int at = line();
      const std::string op = t_[i_++].value;
      a = binary(op, std::move(a), multiplicative(), at);
    }
    return a;
  }
  NodePtr multiplicative() {
    NodePtr a = power();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const int at = line();
      const std::string op = t_[i_++].value;
      a = binary(op, std::move(a), power(), at);
    }
    return a;
  }
  NodePtr power() {
    NodePtr a = test();
    while (is_op("**")) {
      const int at = line();
      ++i_;
      a = binary("**", std::move(a), test(), at);
    }
    return a;
  }
  NodePtr test() {
    NodePtr a = filter();
    while (is_name("is")) {
      NodePtr n = node(K::kTest, line());
      ++i_;
      if (is_name("not")) {
        n->negate = true;
        ++i_;
      }
      if (!is(T::kName)) fail(absl::StrCat("expected a test name after 'is', got ", describe()));
      n->str = t_[i_++].value;
      if (is_op("("))
        fail(absl::StrCat("tests with arguments ('is ", n->str, "(...)') are not supported"));
      n->kids.push_back(std::move(a));
      a = std::move(n);
    }
    return a;
  }
  NodePtr filter() {
    NodePtr a = unary();
    while (is_op("|")) {
      NodePtr n = node(K::kFilter, line());
      ++i_;
      if (!is(T::kName)) fail(absl::StrCat("expected a filter name after '|', got ", describe()));
      n->str = t_[i_++].value;
      n->kids.push_back(std::move(a));
      if (is_op("(")) {
        n->has_args = true;
        arguments(n.get());
      }
      a = std::move(n);
    }
    return a;
  }
  NodePtr unary() {
    if (is(T::kOp, "u-") || is(T::kOp, "u+") || is_op("-") || is_op("+")) {
      NodePtr n = node(K::kUnary, line());
      const std::string v = t_[i_++].value;
      n->str = v.back() == '-' ? "-" : "+";
      n->kids.push_back(unary());
      return n;
    }
    return postfix(primary_expr());
  }
  // ( args ) appended to n->kids.
  void arguments(Node* n) {
    expect(T::kOp, "(", "'('");
    while (!is_op(")")) {
      if (i_ >= t_.size()) fail("a call's '(' is not closed");
      if (is_op("*") || is_op("**")) fail("argument unpacking (* and **) is not supported");
      if (is(T::kName) && i_ + 1 < t_.size() && t_[i_ + 1].type == T::kOp &&
          t_[i_ + 1].value == "=") {
        NodePtr kw = node(K::kKwarg, line());
        kw->str = t_[i_].value;
        i_ += 2;
        kw->kids.push_back(expression());
        n->kids.push_back(std::move(kw));
      } else {
        n->kids.push_back(expression());
      }
      if (is_op(",")) {
        ++i_;
      } else if (!is_op(")")) {
        fail(absl::StrCat("expected ',' or ')' in the arguments, got ", describe()));
      }
    }
    ++i_;
  }
  NodePtr postfix(NodePtr a) {
    while (true) {
      const int at = line();
      if (is_op(".")) {
        ++i_;
        NodePtr n = node(K::kMember, at);
        NodePtr key = node(K::kLiteral, at);
        if (is(T::kName)) {
          key->value = Value::string(t_[i_++].value);
        } else if (is(T::kNumber) && t_[i_].value.find('.') == std::string::npos) {
          key->value = Value::integer(std::strtoll(t_[i_++].value.c_str(), nullptr, 10));
        } else {
          fail(absl::StrCat("expected a name after '.', got ", describe()));
        }
        n->kids.push_back(std::move(a));
        n->kids.push_back(std::move(key));
        a = std::move(n);
      } else if (is_op("[")) {
        ++i_;
        std::vector<NodePtr> parts;
        bool slice = false;
        while (!is_op("]")) {
          if (i_ >= t_.size()) fail("'[' is not closed");
          if (is_op(":")) {
            parts.push_back(nullptr);
            ++i_;
            slice = true;
          } else {
            parts.push_back(expression());
            if (is_op(":")) {
              ++i_;
              slice = true;
            } else if (!is_op("]")) {
              fail(absl::StrCat("expected ']' or ':' in a subscript, got ", describe()));
            }
          }
        }
        ++i_;
        if (parts.empty()) fail("an empty subscript '[]'");
        NodePtr n = node(slice ? K::kSlice : K::kMember, at);
        n->kids.push_back(std::move(a));
        if (slice) {
          if (parts.size() > 3) fail("a slice takes at most start:stop:step");
          parts.resize(3);
        }
        for (NodePtr& p : parts) n->kids.push_back(std::move(p));
        a = std::move(n);
      } else if (is_op("(")) {
        NodePtr n = node(K::kCall, at);
        n->kids.push_back(std::move(a));
        arguments(n.get());
        a = std::move(n);
      } else {
        return a;
      }
    }
  }
  NodePtr primary_expr() {
    if (i_ >= t_.size()) fail("unexpected end of the template in an expression");
    const Token& k = t_[i_];
    const int at = k.line;
    switch (k.type) {
      case T::kNumber: {
        ++i_;
        NodePtr n = node(K::kLiteral, at);
        n->value = k.value.find('.') != std::string::npos
                       ? Value::floating(std::strtod(k.value.c_str(), nullptr))
                       : Value::integer(std::strtoll(k.value.c_str(), nullptr, 10));
        return n;
      }
      case T::kString: {
        std::string s;
        while (is(T::kString)) s += t_[i_++].value;  // adjacent literals concatenate
        NodePtr n = node(K::kLiteral, at);
        n->value = Value::string(std::move(s));
        return n;
      }
      case T::kName: {
        ++i_;
        NodePtr n = node(K::kName, at);
        n->str = k.value;
        return n;
      }
      case T::kOp:
        if (k.value == "(") {
          ++i_;
          NodePtr e = sequence(false);
          expect(T::kOp, ")", "')'");
          return e;
        }
        if (k.value == "[") {
          ++i_;
          NodePtr n = node(K::kList, at);
          while (!is_op("]")) {
            if (i_ >= t_.size()) fail("'[' of a list is not closed");
            n->kids.push_back(expression());
            if (is_op(",")) ++i_;
          }
          ++i_;
          return n;
        }
        if (k.value == "{") {
          ++i_;
          NodePtr n = node(K::kDict, at);
          while (!is_op("}")) {
            if (i_ >= t_.size()) fail("'{' of a dict is not closed");
            n->kids.push_back(expression());
            expect(T::kOp, ":", "':' between a key and its value");
            n->kids.push_back(expression());
            if (is_op(",")) ++i_;
          }
          ++i_;
          return n;
        }
        break;
      default:
        break;
    }
    fail(absl::StrCat("unexpected ", describe(), " in an expression"));
  }

  const std::vector<Token>& t_;
  size_t i_ = 0;
};

}  // namespace

std::vector<NodePtr> parse(const std::vector<Token>& tokens) { return Parser(tokens).program(); }

}  // namespace anvil::io::jinja
