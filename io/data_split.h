// Megatron's train/valid/test split string ("969,30,1") -> sequence ranges of a dataset.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

// Megatron's split string "969,30,1" -> document ranges [begin, end) for train/valid/test
// (weights normalized, boundaries rounded as Megatron's get_split_index does).
absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> split_documents(const std::string& split,
                                                                         int64_t num_documents);

}  // namespace anvil::io
