// Deterministic GPT-2 initialization, identical on every device: values are generated on the
// host in f32 from (seed, flat element offset) and uploaded (rounded to the compute dtype).
//   weights and embeddings  N(0, init_std)          (wte rows >= vocab_size: 0, they are padding)
//   attn.c_proj / mlp.c_proj weights  N(0, init_std / sqrt(2 n_layers))   (GPT-2 residual scaling)
//   biases, LN beta  0;   LN gamma  1
// N(0, 1) comes from Box-Muller over Philox4x32-10 with counter = flat offset, so a parameter's
// values depend on the seed and the layout only.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "model/gpt.h"
#include "model/param_table.h"
#include "parallel/zero.h"

namespace anvil::model::gpt_detail {

// The N(0, 1) sample for flat element `index` under `seed`.
double init_normal(uint64_t seed, uint64_t index);

// Writes every parameter's master and compute copy (the flat buffers must already be zero, so
// padding stays 0). Synchronizes the stream.
// Where initial values go: a flat buffer holding every element [flat_numel], or (part set) a
// ZeRO shard [flat_numel / dp] holding this rank's pieces.
struct InitTarget {
  engine::TensorView buf;
  const parallel::ZeroPartition* part = nullptr;
};

// Shards (TP, PP) get the values of the whole model at their global elements.
void init_params(const GptConfig& cfg, const GptShard& shard, const ParamTable& table,
                 const std::vector<InitTarget>& targets, uint64_t seed, engine::Stream& stream);

}  // namespace anvil::model::gpt_detail
