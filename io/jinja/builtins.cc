// Filters, tests, methods and globals of the Jinja subset (io/jinja/builtins.h), ported from
// @huggingface/jinja's runtime.ts so that chat templates render byte for byte as there.
#include "io/jinja/builtins.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <ctime>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "io/jinja/lexer.h"

namespace anvil::io::jinja {
namespace {

using K = Value::Kind;

[[noreturn]] void fail(const std::string& m) { throw Error(0, m); }

// The code points of s as UTF-8 pieces (invalid bytes: one piece each).
std::vector<std::string> code_points(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = s[i];
    size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
    if (c >= 0x80 && c < 0xC0) n = 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

std::string map_case(const std::string& s, bool upper) {
  std::string out;
  for (const std::string& p : code_points(s)) {
    utf8proc_int32_t cp;
    if (utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(p.data()),
                         static_cast<utf8proc_ssize_t>(p.size()), &cp) <= 0) {
      out += p;
      continue;
    }
    cp = upper ? utf8proc_toupper(cp) : utf8proc_tolower(cp);
    utf8proc_uint8_t buf[4];
    out.append(reinterpret_cast<char*>(buf), utf8proc_encode_char(cp, buf));
  }
  return out;
}

bool is_word_byte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

// JavaScript's /\b\w/g uppercased (the reference's title()).
std::string title_case(const std::string& s) {
  std::string out = s;
  for (size_t i = 0; i < out.size(); ++i) {
    if (is_word_byte(out[i]) && (i == 0 || !is_word_byte(out[i - 1])) && out[i] >= 'a' &&
        out[i] <= 'z') {
      out[i] = static_cast<char>(out[i] - 'a' + 'A');
    }
  }
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to,
                        int64_t count) {
  if (count == 0) return s;
  int64_t left = count < 0 ? INT64_MAX : count;
  std::string out;
  if (from.empty()) {  // between every code point, and at both ends
    for (const std::string& p : code_points(s)) {
      if (left > 0) {
        out += to;
        --left;
      }
      out += p;
    }
    if (left > 0) out += to;
    return out;
  }
  size_t i = 0;
  while (left > 0) {
    const size_t k = s.find(from, i);
    if (k == std::string::npos) break;
    out += s.substr(i, k - i) + to;
    i = k + from.size();
    --left;
  }
  return out + s.substr(i);
}

const Value* arg(const Args& a, size_t i, const char* name) {
  if (i < a.pos.size()) return &a.pos[i];
  return a.kwarg(name);
}

// str.split as Python (and the reference) does it.
Value split(const std::string& s, const Value* sep, const Value* maxsplit) {
  const int64_t max = maxsplit && maxsplit->is(K::kInt) ? maxsplit->i() : -1;
  if (maxsplit && !maxsplit->is(K::kInt)) fail("split(): maxsplit must be an integer");
  List out;
  if (sep == nullptr || sep->is(K::kNone)) {
    const std::string t = js_trim_start(s);
    size_t i = 0;
    while (i < t.size()) {
      size_t e = i;
      while (e < t.size() && js_space_at(t, e) == 0) ++e;
      if (max != -1 && static_cast<int64_t>(out.size()) >= max) {
        out.push_back(Value::string(t.substr(i)));
        break;
      }
      out.push_back(Value::string(t.substr(i, e - i)));
      i = e;
      while (size_t n = js_space_at(t, i)) i += n;
    }
    return Value::list(std::move(out));
  }
  if (!sep->is(K::kString)) fail("split(): the separator must be a string or none");
  if (sep->s().empty()) fail("split(): empty separator");
  std::vector<std::string> parts;
  size_t i = 0;
  while (true) {
    const size_t k = s.find(sep->s(), i);
    if (k == std::string::npos) break;
    parts.push_back(s.substr(i, k - i));
    i = k + sep->s().size();
  }
  parts.push_back(s.substr(i));
  if (max != -1 && static_cast<int64_t>(parts.size()) > max) {
    std::vector<std::string> rest(parts.begin() + max, parts.end());
    parts.resize(max);
    parts.push_back(absl::StrJoin(rest, sep->s()));
  }
  for (std::string& p : parts) out.push_back(Value::string(std::move(p)));
  return Value::list(std::move(out));
}

Value affix_test(const std::string& s, const Value* pattern, bool prefix, const char* name) {
  if (pattern == nullptr) fail(absl::StrCat(name, "() requires an argument"));
  auto one = [&](const std::string& p) {
    if (p.size() > s.size()) return false;
    return prefix ? s.compare(0, p.size(), p) == 0
                  : s.compare(s.size() - p.size(), p.size(), p) == 0;
  };
  if (pattern->is(K::kString)) return Value::boolean(one(pattern->s()));
  if (pattern->is(K::kList)) {
    for (const Value& p : pattern->items()) {
      if (!p.is(K::kString)) fail(absl::StrCat(name, "(): tuple elements must be strings"));
      if (one(p.s())) return Value::boolean(true);
    }
    return Value::boolean(false);
  }
  fail(absl::StrCat(name, "() argument must be a string or a tuple of strings"));
}

Value string_method(const std::string& s, const std::string& name) {
  auto fn = [](Function f) { return Value::function(std::move(f)); };
  // strip/lstrip/rstrip ignore their argument in the reference (they trim whitespace).
  if (name == "upper") return fn([s](const Args&) { return Value::string(map_case(s, true)); });
  if (name == "lower") return fn([s](const Args&) { return Value::string(map_case(s, false)); });
  if (name == "strip") return fn([s](const Args&) { return Value::string(js_trim(s)); });
  if (name == "lstrip") return fn([s](const Args&) { return Value::string(js_trim_start(s)); });
  if (name == "rstrip") return fn([s](const Args&) { return Value::string(js_trim_end(s)); });
  if (name == "title") return fn([s](const Args&) { return Value::string(title_case(s)); });
  if (name == "capitalize") {
    return fn([s](const Args&) {
      std::vector<std::string> cp = code_points(s);
      if (!cp.empty()) cp[0] = map_case(cp[0], true);
      return Value::string(absl::StrJoin(cp, ""));
    });
  }
  if (name == "length") return Value::integer(js_length(s));
  if (name == "startswith") {
    return fn([s](const Args& a) { return affix_test(s, arg(a, 0, ""), true, "startswith"); });
  }
  if (name == "endswith") {
    return fn([s](const Args& a) { return affix_test(s, arg(a, 0, ""), false, "endswith"); });
  }
  if (name == "split") {
    return fn([s](const Args& a) { return split(s, arg(a, 0, "sep"), arg(a, 1, "maxsplit")); });
  }
  if (name == "replace") {
    return fn([s](const Args& a) {
      const Value* from = arg(a, 0, "old");
      const Value* to = arg(a, 1, "new");
      const Value* count = arg(a, 2, "count");
      if (!from || !to || !from->is(K::kString) || !to->is(K::kString)) {
        fail("replace() takes two strings");
      }
      if (count && !count->is(K::kInt) && !count->is(K::kNone)) {
        fail("replace(): count must be an integer or none");
      }
      return Value::string(
          replace_all(s, from->s(), to->s(), count && count->is(K::kInt) ? count->i() : -1));
    });
  }
  return Value();
}

Value dict_method(const Value& d, const std::string& name) {
  auto fn = [](Function f) { return Value::function(std::move(f)); };
  if (name == "get") {
    return fn([d](const Args& a) {
      if (a.pos.empty() || !a.pos[0].is(K::kString)) fail("get(): the key must be a string");
      const Value* v = d.entries().find(a.pos[0].s());
      return v ? *v : a.pos.size() > 1 ? a.pos[1] : Value::none();
    });
  }
  if (name == "items") {
    return fn([d](const Args&) {
      List out;
      for (const auto& [k, v] : d.entries().items)
        out.push_back(Value::list({Value::string(k), v}));
      return Value::list(std::move(out));
    });
  }
  if (name == "keys") {
    return fn([d](const Args&) {
      List out;
      for (const auto& kv : d.entries().items) out.push_back(Value::string(kv.first));
      return Value::list(std::move(out));
    });
  }
  if (name == "values") {
    return fn([d](const Args&) {
      List out;
      for (const auto& kv : d.entries().items) out.push_back(kv.second);
      return Value::list(std::move(out));
    });
  }
  return Value();
}

int64_t to_int(const std::string& s, bool* ok) {  // JavaScript's parseInt(s, 10)
  const std::string t = js_trim_start(s);
  char* end = nullptr;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  *ok = end != t.c_str();
  return v;
}

// xs | selectattr(attr [, test [, value]]) and rejectattr as the reference runs them: attr is
// looked up on each dict (no dotted paths), and kept where test(attribute, value) holds (no
// test: where the attribute is truthy). An absent attribute fails the test whatever it is (the
// reference's `a ? test(a, value) : false`), so selectattr drops such items and rejectattr keeps
// them: selectattr("tool_calls", "undefined") keeps nothing, unlike Python's Jinja.
Value select_attr(const Value& v, const Args& a, bool select) {
  const char* name = select ? "selectattr" : "rejectattr";
  if (!v.is(K::kList))
    fail(absl::StrCat("the filter '", name, "' does not apply to a ", v.type_name()));
  if (a.pos.empty() || !a.pos[0].is(K::kString) || !a.kw.empty()) {
    fail(absl::StrCat(name, "() takes an attribute name, then a test name and its value"));
  }
  for (const Value& x : v.items()) {
    if (!x.is(K::kDict) && !x.is(K::kNamespace)) {
      fail(absl::StrCat(name, "() applies to a list of dicts, not to one holding a ",
                        x.type_name()));
    }
  }
  const Value* test = a.pos.size() > 1 ? &a.pos[1] : nullptr;
  const Value* value = a.pos.size() > 2 ? &a.pos[2] : nullptr;
  List out;
  for (const Value& x : v.items()) {
    const Value* attr = x.entries().find(a.pos[0].s());
    const bool r = attr != nullptr && (test ? apply_test(test->s(), *attr, value) : attr->truthy());
    if (r == select) out.push_back(x);
  }
  return Value::list(std::move(out));
}

}  // namespace

int64_t js_length(const std::string& s) {
  int64_t n = 0;
  for (const unsigned char c : s) {
    if ((c & 0xC0) != 0x80) n += c >= 0xF0 ? 2 : 1;  // astral code points: a surrogate pair
  }
  return n;
}

Value member(const Value& object, const Value& key) {
  switch (object.kind()) {
    case K::kDict:
    case K::kNamespace: {
      if (!key.is(K::kString)) {
        fail(absl::StrCat("a ", object.type_name(), " is indexed by strings, not by a ",
                          key.type_name()));
      }
      if (const Value* v = object.entries().find(key.s())) return *v;
      return object.is(K::kDict) ? dict_method(object, key.s()) : Value();
    }
    case K::kList:
    case K::kString: {
      if (key.is(K::kInt)) {
        if (object.is(K::kList)) {
          const int64_t n = static_cast<int64_t>(object.items().size());
          const int64_t i = key.i() < 0 ? key.i() + n : key.i();
          return i >= 0 && i < n ? object.items()[i] : Value();
        }
        const std::vector<std::string> cp = code_points(object.s());
        const int64_t n = static_cast<int64_t>(cp.size());
        const int64_t i = key.i() < 0 ? key.i() + n : key.i();
        return i >= 0 && i < n ? Value::string(cp[i]) : Value();
      }
      if (key.is(K::kString)) {
        if (object.is(K::kString)) return string_method(object.s(), key.s());
        return key.s() == "length" ? Value::integer(static_cast<int64_t>(object.items().size()))
                                   : Value();
      }
      fail(absl::StrCat("a ", object.type_name(), " is indexed by integers, not by a ",
                        key.type_name()));
    }
    default:
      if (!key.is(K::kString)) {
        fail(absl::StrCat("cannot index a ", object.type_name(), " with a ", key.type_name()));
      }
      return Value();
  }
}

Value slice(const Value& object, const Value& start_v, const Value& stop_v, const Value& step_v) {
  for (const Value* v : {&start_v, &stop_v, &step_v}) {
    if (!v->is(K::kInt) && !v->is(K::kUndefined)) fail("slice bounds must be integers");
  }
  std::vector<Value> items;
  const bool is_list = object.is(K::kList);
  if (is_list) {
    items = object.items();
  } else if (object.is(K::kString)) {
    for (std::string& p : code_points(object.s())) items.push_back(Value::string(std::move(p)));
  } else {
    fail(absl::StrCat("only lists and strings can be sliced, not a ", object.type_name()));
  }
  const int64_t n = static_cast<int64_t>(items.size());
  const int64_t step = step_v.is(K::kInt) ? step_v.i() : 1;
  if (step == 0) fail("slice step cannot be zero");
  int64_t start, stop;
  if (step > 0) {
    start = start_v.is(K::kInt) ? start_v.i() : 0;
    stop = stop_v.is(K::kInt) ? stop_v.i() : n;
    start = start < 0 ? std::max(n + start, int64_t{0}) : std::min(start, n);
    stop = stop < 0 ? std::max(n + stop, int64_t{0}) : std::min(stop, n);
  } else {
    start = start_v.is(K::kInt) ? start_v.i() : n - 1;
    stop = stop_v.is(K::kInt) ? stop_v.i() : -1;
    start = start < 0 ? std::max(n + start, int64_t{-1}) : std::min(start, n - 1);
    stop = stop < -1 ? std::max(n + stop, int64_t{-1}) : std::min(stop, n - 1);
  }
  List out;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) out.push_back(items[i]);
  if (is_list) return Value::list(std::move(out));
  std::string s;
  for (const Value& v : out) s += v.s();
  return Value::string(std::move(s));
}

bool apply_test(const std::string& name, const Value& v, const Value* value) {
  if (name == "equalto" || name == "eq") {
    // JavaScript's === of the payloads: strings and numbers by value, lists and dicts by
    // identity.
    if (value == nullptr) fail(absl::StrCat("the test '", name, "' needs a value to compare"));
    return v.same(*value);
  }
  if (name == "defined") return !v.is(K::kUndefined);
  if (name == "undefined") return v.is(K::kUndefined);
  if (name == "none") return v.is(K::kNone);
  if (name == "string") return v.is(K::kString);
  if (name == "boolean") return v.is(K::kBool);
  if (name == "number") return v.is_number();
  if (name == "integer") return v.is(K::kInt);
  if (name == "iterable") return v.is(K::kList) || v.is(K::kString);
  if (name == "mapping") return v.is(K::kDict);
  if (name == "sequence") return v.is(K::kList) || v.is(K::kDict) || v.is(K::kString);
  if (name == "callable") return v.is(K::kFunction);
  if (name == "true") return v.is(K::kBool) && v.b();
  if (name == "false") return v.is(K::kBool) && !v.b();
  if (name == "lower") return v.is(K::kString) && v.s() == map_case(v.s(), false);
  if (name == "upper") return v.is(K::kString) && v.s() == map_case(v.s(), true);
  if (name == "odd" || name == "even") {
    if (!v.is(K::kInt))
      fail(absl::StrCat("the test '", name, "' needs an integer, got a ", v.type_name()));
    return (v.i() % 2 != 0) == (name == "odd");
  }
  fail(absl::StrCat("the test '", name,
                    "' is not supported (supported: defined, undefined, none, string, boolean, "
                    "number, integer, iterable, mapping, sequence, callable, true, false, lower, "
                    "upper, odd, even, equalto, eq)"));
}

Value apply_filter(const std::string& name, const Value& v, bool has_args, const Args& a) {
  auto bad_type = [&]() -> Value {
    fail(absl::StrCat("the filter '", name, "' does not apply to a ", v.type_name()));
  };
  if (name == "safe") return v;
  if (name == "tojson") {
    const Value* indent = a.kwarg("indent");
    if (indent && !indent->is(K::kInt) && !indent->is(K::kNone))
      fail("tojson(): indent must be an integer");
    for (const auto& kv : a.kw) {
      if (kv.first != "indent")
        fail(absl::StrCat("tojson(): the argument '", kv.first, "' is not supported"));
    }
    return Value::string(
        to_json(v, indent && indent->is(K::kInt) ? static_cast<int>(indent->i()) : 0));
  }
  if (name == "default" || name == "d") {
    const Value def = a.pos.empty() ? Value::string("") : a.pos[0];
    const Value* boolean = arg(a, 1, "boolean");
    const bool b = boolean && boolean->is(K::kBool) && boolean->b();
    return v.is(K::kUndefined) || (b && !v.truthy()) ? def : v;
  }
  if (has_args && name == "join") {
    const Value* sep = arg(a, 0, "separator");
    if (sep && !sep->is(K::kString)) fail("join(): the separator must be a string");
    std::vector<std::string> parts;
    if (v.is(K::kString)) {
      parts = code_points(v.s());
    } else if (v.is(K::kList)) {
      for (const Value& x : v.items()) parts.push_back(x.concat_text());
    } else {
      return bad_type();
    }
    return Value::string(absl::StrJoin(parts, sep ? sep->s() : ""));
  }
  if (name == "int" || name == "float") {
    const bool as_int = name == "int";
    const Value* d = has_args ? arg(a, 0, "default") : nullptr;
    const Value def = d ? *d : as_int ? Value::integer(0) : Value::floating(0);
    if (v.is(K::kString)) {
      if (as_int) {
        bool ok;
        const int64_t x = to_int(v.s(), &ok);
        return ok ? Value::integer(x) : def;
      }
      const std::string t = js_trim_start(v.s());
      char* end = nullptr;
      const double x = std::strtod(t.c_str(), &end);
      return end != t.c_str() ? Value::floating(x) : def;
    }
    if (v.is(K::kBool)) return as_int ? Value::integer(v.b()) : Value::floating(v.b());
    if (v.is_number()) {
      if (has_args) return v;
      return as_int ? Value::integer(static_cast<int64_t>(std::floor(v.number())))
                    : Value::floating(v.number());
    }
    return bad_type();
  }
  if (v.is(K::kString) && name == "replace") {
    return member(v, Value::string("replace")).fn()(a);
  }
  if (v.is(K::kString) && name == "indent") {
    const Value* w = arg(a, 0, "width");
    const Value* first = arg(a, 1, "first");
    const Value* blank = arg(a, 2, "blank");
    std::string pad = "    ";
    if (w && w->is(K::kInt))
      pad = std::string(static_cast<size_t>(std::max<int64_t>(w->i(), 0)), ' ');
    if (w && w->is(K::kString)) pad = w->s();
    const bool f = first && first->is(K::kBool) && first->b();
    const bool b = blank && blank->is(K::kBool) && blank->b();
    std::vector<std::string> lines;
    size_t i = 0;
    while (true) {
      const size_t k = v.s().find('\n', i);
      lines.push_back(v.s().substr(i, k == std::string::npos ? std::string::npos : k - i));
      if (k == std::string::npos) break;
      i = k + 1;
    }
    for (size_t j = 0; j < lines.size(); ++j) {
      if ((j == 0 && !f) || (lines[j].empty() && !b)) continue;
      lines[j] = pad + lines[j];
    }
    return Value::string(absl::StrJoin(lines, "\n"));
  }
  if (has_args && (name == "selectattr" || name == "rejectattr")) {
    return select_attr(v, a, name == "selectattr");
  }
  if (has_args) {
    fail(absl::StrCat("the filter '", name, "' with arguments is not supported"));
  }
  switch (v.kind()) {
    case K::kList: {
      const List& l = v.items();
      if (name == "list") return v;
      if (name == "first") return l.empty() ? Value() : l.front();
      if (name == "last") return l.empty() ? Value() : l.back();
      if (name == "length" || name == "count")
        return Value::integer(static_cast<int64_t>(l.size()));
      if (name == "reverse") return Value::list(List(l.rbegin(), l.rend()));
      if (name == "join") return apply_filter(name, v, true, Args{});
      if (name == "string") return Value::string(to_json(v));
      if (name == "unique") {
        List out;
        for (const Value& x : l) {
          bool seen = false;
          for (const Value& y : out) seen = seen || x.same(y);
          if (!seen) out.push_back(x);
        }
        return Value::list(std::move(out));
      }
      break;
    }
    case K::kString: {
      if (name == "length" || name == "count") return Value::integer(js_length(v.s()));
      if (name == "upper" || name == "lower" || name == "title" || name == "capitalize") {
        return member(v, Value::string(name)).fn()(Args{});
      }
      if (name == "trim") return Value::string(js_trim(v.s()));
      if (name == "indent") return apply_filter(name, v, true, Args{});
      if (name == "join" || name == "string") return v;
      break;
    }
    case K::kInt:
    case K::kFloat:
      if (name == "abs") {
        return v.is(K::kInt) ? Value::integer(std::llabs(v.i()))
                             : Value::floating(std::fabs(v.f()));
      }
      if (name == "string") return Value::string(v.str());
      break;
    case K::kDict:
      if (name == "items" || name == "keys" || name == "values") {
        return dict_method(v, name).fn()(Args{});
      }
      if (name == "length" || name == "count") {
        return Value::integer(static_cast<int64_t>(v.entries().items.size()));
      }
      break;
    case K::kBool:
      if (name == "bool") return v;
      if (name == "string") return Value::string(v.b() ? "true" : "false");
      break;
    default:
      break;
  }
  static const char* kKnown[] = {
      "trim",    "length",  "count",  "tojson", "upper",  "lower",  "title", "capitalize", "first",
      "last",    "default", "items",  "keys",   "values", "string", "join",  "replace",    "list",
      "reverse", "unique",  "indent", "int",    "float",  "abs",    "bool",  "safe"};
  for (const char* k : kKnown) {
    if (name == k) return bad_type();
  }
  fail(absl::StrCat("the filter '", name,
                    "' is not supported (supported: ", absl::StrJoin(kKnown, ", "), ")"));
}

Dict globals() {
  Dict g;
  g.set("true", Value::boolean(true));
  g.set("false", Value::boolean(false));
  g.set("none", Value::none());
  g.set("True", Value::boolean(true));
  g.set("False", Value::boolean(false));
  g.set("None", Value::none());
  g.set("raise_exception", Value::function([](const Args& a) -> Value {
          std::vector<std::string> parts;
          for (const Value& v : a.pos) parts.push_back(v.str());
          fail("raise_exception(): " + absl::StrJoin(parts, ","));
        }));
  g.set("namespace", Value::function([](const Args& a) {
          Dict d;
          if (a.pos.size() > 1) fail("namespace() takes at most one positional argument");
          if (!a.pos.empty()) {
            if (!a.pos[0].is(K::kDict)) fail("namespace(): the argument must be a dict");
            for (const auto& [k, v] : a.pos[0].entries().items) d.set(k, v);
          }
          for (const auto& [k, v] : a.kw) d.set(k, v);
          return Value::name_space(std::move(d));
        }));
  g.set("range", Value::function([](const Args& a) {
          for (const Value& v : a.pos) {
            if (!v.is(K::kInt)) fail("range() takes integers");
          }
          if (a.pos.empty() || a.pos.size() > 3) fail("range() takes 1 to 3 integers");
          int64_t start = 0, stop, step = 1;
          if (a.pos.size() == 1) {
            stop = a.pos[0].i();
          } else {
            start = a.pos[0].i();
            stop = a.pos[1].i();
            if (a.pos.size() == 3) step = a.pos[2].i();
          }
          if (step == 0) fail("range() step must not be zero");
          List out;
          for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
            out.push_back(Value::integer(i));
            if (out.size() > 1000000) fail("range() of more than a million items");
          }
          return Value::list(std::move(out));
        }));
  g.set("strftime_now", Value::function([](const Args& a) {
          if (a.pos.empty() || !a.pos[0].is(K::kString))
            fail("strftime_now() takes a format string");
          const std::time_t t = std::time(nullptr);
          std::tm tm{};
          localtime_r(&t, &tm);
          char buf[256];
          const size_t n = std::strftime(buf, sizeof(buf), a.pos[0].s().c_str(), &tm);
          return Value::string(std::string(buf, n));
        }));
  return g;
}

}  // namespace anvil::io::jinja
