// The values of the Jinja subset (io/jinja/template.h): undefined, none, booleans, integers,
// floats, strings, lists, dicts (insertion-ordered), namespaces and built-in functions. Lists,
// dicts and namespaces are shared by reference, as in Jinja and @huggingface/jinja (a namespace
// set inside a loop is seen after it). Printing and equality follow @huggingface/jinja, the
// reference that bin/serve's chat rendering must match byte for byte.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace anvil::io::jinja {

// A rendering or parsing failure; caught at the API boundary (template.cc) and returned as an
// absl::Status. `line`: 1-based line of the template (0: unknown).
class Error : public std::runtime_error {
 public:
  Error(int line, const std::string& message) : std::runtime_error(message), line_(line) {}
  int line() const { return line_; }

 private:
  int line_;
};

class Value;
using List = std::vector<Value>;
// Dict entries in insertion order (chat messages are small: linear lookup).
struct Dict {
  std::vector<std::pair<std::string, Value>> items;
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value v);
};

// Positional and keyword arguments of a call.
struct Args {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  const Value* kwarg(const std::string& name) const;
};
using Function = std::function<Value(const Args&)>;

class Value {
 public:
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kDict,
    kNamespace,
    kFunction
  };

  Value() = default;
  static Value none();
  static Value boolean(bool b);
  static Value integer(int64_t i);
  static Value floating(double f);
  static Value string(std::string s);
  static Value list(List items = {});
  static Value dict(Dict d = {});
  static Value name_space(Dict d);
  static Value function(Function f);

  Kind kind() const { return kind_; }
  bool is(Kind k) const { return kind_ == k; }
  bool is_number() const { return kind_ == Kind::kInt || kind_ == Kind::kFloat; }
  bool b() const { return b_; }
  int64_t i() const { return i_; }
  double f() const { return f_; }
  double number() const { return kind_ == Kind::kInt ? static_cast<double>(i_) : f_; }
  const std::string& s() const { return s_; }
  List& items() const { return *list_; }
  Dict& entries() const { return *dict_; }
  const Function& fn() const { return *fn_; }

  // Truthiness as @huggingface/jinja's __bool__: empty string/list/dict, 0, none and undefined
  // are false; a namespace or function is true.
  bool truthy() const;
  // The text `{{ v }}` prints (none and undefined print nothing: the caller skips them).
  std::string str() const;
  // The text `+` and `~` concatenate (a float 1.0 is "1" there, as JavaScript prints numbers).
  std::string concat_text() const;
  // A type name for messages ("string", "list", ...).
  const char* type_name() const;
  // Same object (lists, dicts, namespaces, functions) or equal primitive.
  bool same(const Value& o) const;

 private:
  Kind kind_ = Kind::kUndefined;
  bool b_ = false;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Function> fn_;
};

// JavaScript's Number.prototype.toString of a finite double (shortest round trip).
std::string js_number(double v);
// JSON text of v as @huggingface/jinja's toJSON (Python json.dumps-like separators ", " and
// ": "; indent >= 1: one item a line; non-ASCII kept). Undefined is null; functions are an error.
std::string to_json(const Value& v, int indent = 0, int depth = 0);
// JavaScript's JSON.stringify of a string.
std::string json_quote(const std::string& s);

}  // namespace anvil::io::jinja
