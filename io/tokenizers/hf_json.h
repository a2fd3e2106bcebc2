// JSON access for the tokenizer.json parsers (io/tokenizers/hf_*.cc) without exceptions: every
// value is type-checked before use, and a bad one becomes an InvalidArgument naming the file and
// the field ("HF tokenizer 'f': pre_tokenizer.pretokenizers[1].behavior must be ...").
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace anvil::io::hf_internal {

using json = nlohmann::json;

// Parses `text`; InvalidArgument "name:line:column: not valid JSON" on failure.
absl::StatusOr<json> parse_json(absl::string_view text, const std::string& name);

// The file being parsed, for messages.
struct Ctx {
  std::string name;
  // InvalidArgument "HF tokenizer 'name': <where> <what>".
  absl::Status bad(const std::string& where, const std::string& what) const;
  // Unimplemented "HF tokenizer 'name': <component> type '<type>' is not supported (<supported>)".
  absl::Status unsupported(const std::string& component, const std::string& type,
                           const std::string& supported) const;
};

// obj[key] as a bool; missing or null -> `fallback`.
absl::Status get_bool(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                      bool fallback, bool* out);
// obj[key] as a string; missing or null -> nullopt.
absl::Status get_string(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                        std::optional<std::string>* out);
// obj[key] as a non-negative integer; missing or null -> `fallback`.
absl::Status get_uint(const Ctx& ctx, const json& obj, const char* key, const std::string& where,
                      uint64_t fallback, uint64_t* out);
// A token id: an integer in [0, 2^31 - 1).
absl::Status get_id(const Ctx& ctx, const json& value, const std::string& where, int32_t* out);
// obj["type"], which must be a string.
absl::StatusOr<std::string> get_type(const Ctx& ctx, const json& obj, const std::string& where);
// obj[key], which must be an array.
absl::StatusOr<const json*> get_array(const Ctx& ctx, const json& obj, const char* key,
                                      const std::string& where);

// A Split / Replace "pattern": {"String": s} or {"Regex": r}.
struct PatternSpec {
  bool is_regex = false;
  std::string text;
};
absl::StatusOr<PatternSpec> get_pattern(const Ctx& ctx, const json& obj, const std::string& where);

}  // namespace anvil::io::hf_internal
