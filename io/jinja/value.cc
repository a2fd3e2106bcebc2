// Values of the Jinja subset: construction, truthiness, printing and JSON as @huggingface/jinja
// does them (io/jinja/value.h).
#include "io/jinja/value.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace anvil::io::jinja {

const Value* Dict::find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Dict::set(const std::string& key, Value v) {
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* Args::kwarg(const std::string& name) const {
  for (const auto& [k, v] : kw) {
    if (k == name) return &v;
  }
  return nullptr;
}

Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
Value Value::boolean(bool b) {
  Value v;
  v.kind_ = Kind::kBool;
  v.b_ = b;
  return v;
}
Value Value::integer(int64_t i) {
  Value v;
  v.kind_ = Kind::kInt;
  v.i_ = i;
  return v;
}
Value Value::floating(double f) {
  Value v;
  v.kind_ = Kind::kFloat;
  v.f_ = f;
  return v;
}
Value Value::string(std::string s) {
  Value v;
  v.kind_ = Kind::kString;
  v.s_ = std::move(s);
  return v;
}
Value Value::list(List items) {
  Value v;
  v.kind_ = Kind::kList;
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::dict(Dict d) {
  Value v;
  v.kind_ = Kind::kDict;
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}
Value Value::name_space(Dict d) {
  Value v = dict(std::move(d));
  v.kind_ = Kind::kNamespace;
  return v;
}
Value Value::function(Function f) {
  Value v;
  v.kind_ = Kind::kFunction;
  v.fn_ = std::make_shared<Function>(std::move(f));
  return v;
}

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
      return b_;
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0 && !std::isnan(f_);
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->items.empty();
    case Kind::kNamespace:
    case Kind::kFunction:
      return true;
  }
  return false;
}

std::string js_number(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "Infinity" : "-Infinity";
  if (v == 0) return "0";
  // Shortest digits that round-trip, then JavaScript's layout of them.
  char buf[40];
  int prec = 1;
  for (; prec <= 17; ++prec) {
    std::snprintf(buf, sizeof(buf), "%.*e", prec - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::string m(buf);
  const size_t e = m.find('e');
  const int exp = std::atoi(m.c_str() + e + 1);
  std::string digits;
  for (size_t i = 0; i < e; ++i) {
    if (m[i] >= '0' && m[i] <= '9') digits += m[i];
  }
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();
  const std::string sign = v < 0 ? "-" : "";
  const int k = static_cast<int>(digits.size()), n = exp + 1;
  if (k <= n && n <= 21) return sign + digits + std::string(n - k, '0');
  if (0 < n && n <= 21) return sign + digits.substr(0, n) + "." + digits.substr(n);
  if (-6 < n && n <= 0) return sign + "0." + std::string(-n, '0') + digits;
  const std::string es = (n - 1 >= 0 ? "+" : "-") + std::to_string(std::abs(n - 1));
  if (k == 1) return sign + digits + "e" + es;
  return sign + digits.substr(0, 1) + "." + digits.substr(1) + "e" + es;
}

std::string Value::str() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return "";
    case Kind::kBool:
      return b_ ? "true" : "false";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      if (f_ == 0 && std::signbit(f_)) return "-0.0";
      if (std::isfinite(f_) && std::floor(f_) == f_) {
        char buf[400];
        std::snprintf(buf, sizeof(buf), "%.1f", f_);
        return buf;
      }
      return js_number(f_);
    case Kind::kString:
      return s_;
    case Kind::kList:
    case Kind::kDict:
    case Kind::kNamespace:
      return to_json(*this);
    case Kind::kFunction:
      return "[function]";
  }
  return "";
}

std::string Value::concat_text() const {
  switch (kind_) {
    case Kind::kFloat:
      return js_number(f_);
    case Kind::kString:
    case Kind::kBool:
    case Kind::kInt:
      return str();
    default:
      throw Error(0, absl::StrCat("cannot concatenate a ", type_name(), " to a string"));
  }
}

const char* Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "undefined";
    case Kind::kNone:
      return "none";
    case Kind::kBool:
      return "boolean";
    case Kind::kInt:
      return "integer";
    case Kind::kFloat:
      return "float";
    case Kind::kString:
      return "string";
    case Kind::kList:
      return "list";
    case Kind::kDict:
      return "dict";
    case Kind::kNamespace:
      return "namespace";
    case Kind::kFunction:
      return "function";
  }
  return "?";
}

bool Value::same(const Value& o) const {
  if (is_number() && o.is_number()) return number() == o.number();
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return true;
    case Kind::kBool:
      return b_ == o.b_;
    case Kind::kString:
      return s_ == o.s_;
    case Kind::kList:
      return list_ == o.list_;
    case Kind::kDict:
    case Kind::kNamespace:
      return dict_ == o.dict_;
    case Kind::kFunction:
      return fn_ == o.fn_;
    default:
      return false;
  }
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (const unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\b':
        out += "\\b";
        break;
      case '\f':
        out += "\\f";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof(buf), "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string to_json(const Value& v, int indent, int depth) {
  using K = Value::Kind;
  const std::string item_sep = indent > 0 ? "," : ", ";
  const std::string base = indent > 0 ? "\n" + std::string(indent * depth, ' ') : "";
  const std::string child = indent > 0 ? base + std::string(indent, ' ') : "";
  switch (v.kind()) {
    case K::kUndefined:
    case K::kNone:
      return "null";
    case K::kBool:
      return v.b() ? "true" : "false";
    case K::kInt:
      return std::to_string(v.i());
    case K::kFloat:
      return std::isfinite(v.f()) ? js_number(v.f()) : "null";
    case K::kString:
      return json_quote(v.s());
    case K::kList: {
      if (v.items().empty()) return "[]";
      std::string out = "[" + child;
      bool first = true;
      for (const Value& x : v.items()) {
        if (!first) out += item_sep + child;
        first = false;
        out += to_json(x, indent, depth + 1);
      }
      return out + base + "]";
    }
    case K::kDict:
    case K::kNamespace: {
      if (v.entries().items.empty()) return "{}";
      std::string out = "{";
      bool first = true;
      for (const auto& [k, x] : v.entries().items) {
        if (!first) out += item_sep;
        first = false;
        out += child + json_quote(k) + ": " + to_json(x, indent, depth + 1);
      }
      return out + base + "}";
    }
    case K::kFunction:
      break;
  }
  throw Error(0, "cannot convert a function to JSON");
}

}  // namespace anvil::io::jinja
