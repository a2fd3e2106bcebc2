// Deterministic GPT-2 initialization, identical on every layout (and on every device up to the
// rare 1-ulp differences below): each element's value comes from (seed, its flat offset in the
// whole single-rank model) through ops::init_normal, computed where the target lives (the device,
// or the host for CPU streams) and written straight into the flat buffers:
//   weights and embeddings  N(0, init_std)   (wte, lm_head rows >= vocab_size: 0, they are padding)
//   attn.c_proj / mlp.c_proj weights  N(0, init_std / sqrt(2 n_layers))   (GPT-2 residual scaling)
//   biases, LN beta  0;   LN gamma (ln_1, ln_2, ln_f, wte_ln)  1
// N(0, 1) is Box-Muller in double over Philox4x32-10 with counter = flat offset (see
// ops/init_normal.h), rounded to f32, then to the buffer's dtype.
// CPU and GPU: the CPU (host) values are the reference and equal, bit for bit, those of the
// original host-only initialization (pinned in tests/ops/init_normal_test.cc and
// tests/model/gpt_init_test.cc). On the GPU, CUDA's double log/cos may differ from glibc's by an
// ulp or two of double, so a rare element can differ from the host value by 1 f32 ulp (1 bf16
// ulp in the compute copy); GptInitGpu.DeviceInitWithinOneUlpOfHost and InitNormalGpu.* count
// such elements (printed) and fail on any larger difference.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "model/param_init.h"
#include "model/param_table.h"
#include "model/stack/gpt_config.h"
#include "ops/init_normal.h"
#include "parallel/zero.h"

namespace anvil::model::gpt_detail {

// Writes every parameter's elements into every target (the flat buffers must already be zero,
// so padding stays 0). Shards (TP, PP) get the values of the whole model at their global
// elements. Only enqueues work on the stream: no host synchronization.
void init_params(const GptConfig& cfg, const GptShard& shard, const ParamTable& table,
                 const std::vector<InitTarget>& targets, uint64_t seed, engine::Stream& stream);

}  // namespace anvil::model::gpt_detail
