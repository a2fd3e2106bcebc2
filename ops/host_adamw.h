// Multi-threaded, vectorized AdamW on host memory for optimizer offload (ZeRO-Offload): the same
// math, in the same f32 operation order, as the CPU twin of ops/adamw.h, so the results are
// bitwise equal to cpu::adamw_update:
//   g = grad * grad_scale
//   m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2
//   master -= lr * ((m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps) + wd * master)
//   param = cast(master)  (bf16/f16 round to nearest even; skipped when param is empty)
// The flat range is split into one contiguous block per thread (block starts aligned to 16
// elements); each block runs a branch-free loop that GCC auto-vectorizes.
#pragma once

#include <cstdint>

#include "engine/tensor.h"
#include "ops/adamw.h"

namespace anvil::ops {

// master, m, v, grad: [n] f32 host memory (Device kCpu, contiguous); param: [n] f32, bf16 or f16
// host memory, or empty. threads >= 1 (the calling thread runs one block). Bad arguments are a
// fatal CHECK naming the argument, as in adamw_update.
void host_adamw_update(const AdamWArgs& args, TensorView master, TensorView m, TensorView v,
                       TensorView param, ConstTensorView grad, int threads);

}  // namespace anvil::ops
