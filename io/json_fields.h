// Typed, exception-free access to fields of nlohmann::json documents read from files
// (safetensors headers, checkpoint manifests, HF config.json): every missing field or wrong
// type is a DataLoss error "<where>: <key>: expected ..., got ...", where `where` names the
// file and the object inside it.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace anvil::io {

// Parses `text`; DataLoss "<name>: not valid JSON" on failure (no exception escapes).
absl::StatusOr<nlohmann::json> parse_json_text(std::string_view text, const std::string& name);

absl::StatusOr<const nlohmann::json*> json_field(const nlohmann::json& obj, const std::string& key,
                                                 const std::string& where);
absl::StatusOr<int64_t> json_int(const nlohmann::json& obj, const std::string& key,
                                 const std::string& where);
absl::StatusOr<double> json_number(const nlohmann::json& obj, const std::string& key,
                                   const std::string& where);
absl::StatusOr<std::string> json_string(const nlohmann::json& obj, const std::string& key,
                                        const std::string& where);
absl::StatusOr<std::vector<int64_t>> json_int_list(const nlohmann::json& obj,
                                                   const std::string& key,
                                                   const std::string& where);

// Calls fn(object, "path:line") for every line of a JSONL file that is not blank (ASCII
// whitespace only); DataLoss naming the line for one that is not a JSON object; fn's error
// ends the walk.
absl::Status for_each_jsonl(
    const std::string& path,
    const std::function<absl::Status(const nlohmann::json&, const std::string&)>& fn);

}  // namespace anvil::io
