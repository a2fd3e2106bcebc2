// Template parsing and rendering behind an absl::Status API (io/jinja/template.h): the lexer,
// parser and evaluator throw jinja::Error, turned here into InvalidArgument "line N: ...".
#include "io/jinja/template.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "io/jinja/evaluator.h"
#include "io/jinja/lexer.h"
#include "io/jinja/parser.h"

namespace anvil::io::jinja {
namespace {

absl::Status to_status(const Error& e) {
  return absl::InvalidArgumentError(e.line() > 0 ? absl::StrCat("line ", e.line(), ": ", e.what())
                                                 : std::string(e.what()));
}

}  // namespace

Value from_json(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null:
      return Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return Value::boolean(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return Value::integer(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned:
      return Value::integer(static_cast<int64_t>(j.get<uint64_t>()));
    case nlohmann::ordered_json::value_t::number_float: {
      const double f = j.get<double>();
      if (std::isfinite(f) && std::floor(f) == f && std::fabs(f) < 9.007199254740992e15) {
        return Value::integer(static_cast<int64_t>(f));
      }
      return Value::floating(f);
    }
    case nlohmann::ordered_json::value_t::string:
      return Value::string(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      List l;
      for (const auto& x : j) l.push_back(from_json(x));
      return Value::list(std::move(l));
    }
    case nlohmann::ordered_json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.set(it.key(), from_json(it.value()));
      return Value::dict(std::move(d));
    }
    default:
      return Value();
  }
}

absl::StatusOr<Template> Template::parse(const std::string& source) {
  try {
    Template t;
    t.program_ = std::make_shared<const std::vector<NodePtr>>(jinja::parse(tokenize(source)));
    return t;
  } catch (const Error& e) {
    return to_status(e);
  }
}

absl::StatusOr<std::string> Template::render(const nlohmann::ordered_json& context) const {
  if (!context.is_object()) return absl::InvalidArgumentError("the context must be a JSON object");
  Dict vars;
  for (auto it = context.begin(); it != context.end(); ++it)
    vars.set(it.key(), from_json(it.value()));
  try {
    return jinja::render(*program_, vars);
  } catch (const Error& e) {
    return to_status(e);
  }
}

}  // namespace anvil::io::jinja
