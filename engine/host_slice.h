// HostSlice: a box of a logical (unsharded) f32 tensor, held on the host. It is what a model
// shard hands to the checkpoint writer and what the reader assembles whole tensors from, so
// model/ (which knows the parameter layout) and io/ (which knows the files) never include each
// other. Tensor names carry the state they belong to, e.g. "master/h.0.attn.c_attn.weight".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace anvil::engine {

struct HostSlice {
  std::string tensor;           // logical tensor name
  std::vector<int64_t> shape;   // the whole tensor's logical shape
  std::vector<int64_t> offset;  // first element of the box, per dim
  std::vector<int64_t> extent;  // box size per dim
  std::vector<float> data;      // [prod(extent)] row-major values of the box
};

}  // namespace anvil::engine
