// JSON access for the tokenizer.json parsers (io/tokenizers/hf_json.h).
#include "io/tokenizers/hf_json.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace anvil::io::hf_internal {
namespace {

// Records where a JSON text first fails to parse.
struct ErrorSax {
  size_t position = 0;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) { return true; }
  bool key(std::string&) { return true; }
  bool end_object() { return true; }
  bool start_array(std::size_t) { return true; }
  bool end_array() { return true; }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception&) {
    position = pos;
    return false;
  }
};

}  // namespace

absl::StatusOr<json> parse_json(absl::string_view text, const std::string& name) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  ErrorSax sax;
  json::sax_parse(text.begin(), text.end(), &sax);
  // nlohmann reports the 1-based count of bytes read; point at the byte before it.
  const size_t at = std::min(sax.position > 0 ? sax.position - 1 : 0, text.size());
  size_t line = 1, column = 1;
  for (size_t i = 0; i < at; ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else {
      ++column;
    }
  }
  return absl::InvalidArgumentError(
      absl::StrFormat("%s:%d:%d: not valid JSON", name, line, column));
}

absl::Status Ctx::bad(const std::string& where, const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat("HF tokenizer '", name, "': ", where, " ", what));
}

absl::Status Ctx::unsupported(const std::string& component, const std::string& type,
                              const std::string& supported) const {
  return absl::UnimplementedError(absl::StrCat("HF tokenizer '", name, "': ", component, " type '",
                                               type, "' is not supported (", supported, ")"));
}

absl::Status get_bool(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                      bool fallback, bool* out) {
  *out = fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_boolean()) return ctx.bad(absl::StrCat(where, ".", key), "must be a boolean");
  *out = it->get<bool>();
  return absl::OkStatus();
}

absl::Status get_string(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                        std::optional<std::string>* out) {
  out->reset();
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_string()) return ctx.bad(absl::StrCat(where, ".", key), "must be a string");
  *out = it->get<std::string>();
  return absl::OkStatus();
}

absl::Status get_uint(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                      uint64_t fallback, uint64_t* out) {
  *out = fallback;
  const auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return absl::OkStatus();
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    return ctx.bad(absl::StrCat(where, ".", key), "must be a non-negative integer");
  }
  *out = it->get<uint64_t>();
  return absl::OkStatus();
}

absl::Status get_id(const Ctx& ctx, const json& value, const std::string& where, int32_t* out) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() > INT32_MAX - 1) {
    return ctx.bad(where, "must be a token id (an integer in [0, 2^31-1))");
  }
  *out = static_cast<int32_t>(value.get<int64_t>());
  return absl::OkStatus();
}

absl::StatusOr<std::string> get_type(const Ctx& ctx, const json& obj, const std::string& where) {
  if (!obj.is_object()) return ctx.bad(where, "must be an object");
  std::optional<std::string> type;
  const absl::Status st = get_string(ctx, obj, "type", where, &type);
  if (!st.ok()) return st;
  if (!type) return ctx.bad(where, "has no type");
  return *type;
}

absl::StatusOr<const json*> get_array(const Ctx& ctx, const json& obj, const char* key,
                                      const std::string& where) {
  const auto it = obj.find(key);
  if (it == obj.end() || !it->is_array()) {
    return ctx.bad(absl::StrCat(where, ".", key), "must be a list");
  }
  return &*it;
}

absl::StatusOr<PatternSpec> get_pattern(const Ctx& ctx, const json& obj, const std::string& where) {
  const std::string w = where + ".pattern";
  const auto it = obj.find("pattern");
  if (it == obj.end() || !it->is_object() || it->size() != 1) {
    return ctx.bad(w, "must be {\"String\": ...} or {\"Regex\": ...}");
  }
  PatternSpec p;
  if (const auto s = it->find("String"); s != it->end() && s->is_string()) {
    p.text = s->get<std::string>();
  } else if (const auto r = it->find("Regex"); r != it->end() && r->is_string()) {
    p.is_regex = true;
    p.text = r->get<std::string>();
  } else {
    return ctx.bad(w, "must be {\"String\": ...} or {\"Regex\": ...}");
  }
  return p;
}

}  // namespace anvil::io::hf_internal
