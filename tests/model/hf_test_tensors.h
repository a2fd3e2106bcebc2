// Helpers of the Hugging Face conversion tests (checkpoint_hf_test, hf_bert_test): whole
// tensors of random values and lookup by name.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "engine/host_slice.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::testing_hf {

// A whole tensor `name` of `shape` with uniform values in [-1, 1) from `seed`.
inline engine::HostSlice random_tensor(const std::string& name, std::vector<int64_t> shape,
                                       uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return engine::HostSlice{name, shape, std::vector<int64_t>(shape.size(), 0), shape,
                           testing::random_uniform(n, seed)};
}

inline std::map<std::string, engine::HostSlice> by_name(const std::vector<engine::HostSlice>& v) {
  std::map<std::string, engine::HostSlice> m;
  for (const engine::HostSlice& t : v) m.emplace(t.tensor, t);
  return m;
}

}  // namespace anvil::model::testing_hf
