// Exception-free typed JSON field access (see json_fields.h).
#include "io/json_fields.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/durable_file.h"

namespace anvil::io {

using json = nlohmann::json;

absl::StatusOr<json> parse_json_text(std::string_view text, const std::string& name) {
  json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return absl::DataLossError(absl::StrCat(name, ": not valid JSON"));
  return j;
}

absl::StatusOr<const json*> json_field(const json& obj, const std::string& key,
                                       const std::string& where) {
  if (!obj.is_object()) return absl::DataLossError(absl::StrCat(where, ": expected an object"));
  auto it = obj.find(key);
  if (it == obj.end()) return absl::DataLossError(absl::StrCat(where, ": no field \"", key, "\""));
  return &*it;
}

absl::StatusOr<int64_t> json_int(const json& obj, const std::string& key,
                                 const std::string& where) {
  ANVIL_ASSIGN_OR_RETURN(const json* v, json_field(obj, key, where));
  if (!v->is_number_integer()) {
    return absl::DataLossError(
        absl::StrCat(where, ": ", key, ": expected an integer, got ", v->dump()));
  }
  return v->get<int64_t>();
}

absl::StatusOr<double> json_number(const json& obj, const std::string& key,
                                   const std::string& where) {
  ANVIL_ASSIGN_OR_RETURN(const json* v, json_field(obj, key, where));
  if (!v->is_number()) {
    return absl::DataLossError(
        absl::StrCat(where, ": ", key, ": expected a number, got ", v->dump()));
  }
  return v->get<double>();
}

absl::StatusOr<std::string> json_string(const json& obj, const std::string& key,
                                        const std::string& where) {
  ANVIL_ASSIGN_OR_RETURN(const json* v, json_field(obj, key, where));
  if (!v->is_string()) {
    return absl::DataLossError(
        absl::StrCat(where, ": ", key, ": expected a string, got ", v->dump()));
  }
  return v->get<std::string>();
}

absl::StatusOr<std::vector<int64_t>> json_int_list(const json& obj, const std::string& key,
                                                   const std::string& where) {
  ANVIL_ASSIGN_OR_RETURN(const json* v, json_field(obj, key, where));
  std::vector<int64_t> out;
  bool ok = v->is_array();
  if (ok) {
    for (const json& e : *v) {
      if (!e.is_number_integer()) {
        ok = false;
        break;
      }
      out.push_back(e.get<int64_t>());
    }
  }
  if (!ok) {
    return absl::DataLossError(
        absl::StrCat(where, ": ", key, ": expected a list of integers, got ", v->dump()));
  }
  return out;
}

absl::Status for_each_jsonl(
    const std::string& path,
    const std::function<absl::Status(const nlohmann::json&, const std::string&)>& fn) {
  ANVIL_ASSIGN_OR_RETURN(std::string data, read_file(path));
  size_t pos = 0;
  for (int64_t line_no = 1; pos < data.size(); ++line_no) {
    size_t end = data.find('\n', pos);
    if (end == std::string::npos) end = data.size();
    const absl::string_view line = absl::string_view(data).substr(pos, end - pos);
    pos = end + 1;
    if (absl::StripAsciiWhitespace(line).empty()) continue;
    const std::string where = absl::StrCat(path, ":", line_no);
    ANVIL_ASSIGN_OR_RETURN(json j,
                           parse_json_text(std::string_view(line.data(), line.size()), where));
    if (!j.is_object()) return absl::DataLossError(where + ": expected a JSON object");
    ANVIL_RETURN_IF_ERROR(fn(j, where));
  }
  return absl::OkStatus();
}

}  // namespace anvil::io
