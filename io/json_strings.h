// The top-level string values of one JSON object (a JSONL line of bin/preprocess's input).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace anvil::io {

// Parses `line` as one JSON object (RFC 8259, plus Python's NaN/Infinity literals) and stores
// the decoded string value of each top-level key in `keys` into (*values)[i] (the last one
// wins for duplicate keys, as in Python). \uXXXX escapes become UTF-8, surrogate pairs are
// combined and a lone surrogate becomes U+FFFD; (*lone_surrogates)[i], when given, is the
// 1-based column of the first lone surrogate escape in value i, or 0. Errors (InvalidArgument)
// name the 1-based column: malformed JSON, a key that is missing or whose value is not a string.
absl::Status extract_json_strings(std::string_view line, const std::vector<std::string>& keys,
                                  std::vector<std::string>* values,
                                  std::vector<size_t>* lone_surrogates = nullptr);

}  // namespace anvil::io
