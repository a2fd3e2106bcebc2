// Named dataset groups of Megatron-DeepSpeed's --{train,valid,test}-weighted-split-paths
// (BigScience fork, arguments.py parse_data_paths): one group is
//   "NAME: W1 START1:END1 PREFIX1, W2 START2:END2 PREFIX2, ..."
// (the group's datasets blended by weight, each over the sequences [START, END) as fractions of
// its sequences); an ini value holds several groups separated by ';' (Megatron takes one
// argument per group). Each validation or test group is evaluated and reported separately
// under its name, which also names its index caches.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::model {

struct DataGroup {
  std::string name;
  std::vector<double> weights;                    // unnormalized, one per dataset
  std::vector<std::pair<double, double>> ranges;  // (START, END) fractions, one per dataset
  std::vector<std::string> prefixes;              // PREFIX.bin / PREFIX.idx
};

// "" -> no groups. InvalidArgument naming the group and what is wrong: a missing "NAME:", a
// dataset that is not three fields, a weight that is not a number >= 0, a range that is not
// 0 <= START < END <= 1, a name used twice.
absl::StatusOr<std::vector<DataGroup>> parse_data_groups(const std::string& text);

}  // namespace anvil::model
