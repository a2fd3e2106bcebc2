// Fused softmax + cross-entropy over a vocabulary padded to a multiple of 128, one row per token:
//   p = softmax(logits[r, :vocab]);  loss[r] = -w[r] log p[target[r]]                (=)
//   dlogits[r, c] = grad_scale * w[r] * (p[c] - [c == target[r]]) for c < vocab, 0 for padding
//                                                                                     (=)
// w = args.row_weights ([rows] f32; empty: every w[r] = 1), per-token loss weights
// (Megatron-DeepSpeed's reweight_loss_based_on_position_frequency multiplies its loss mask).
// target < 0 marks an ignored token: loss 0, gradient row 0. grad_scale is d(total)/d(loss[r]),
// usually 1 / (number of counted tokens in the global batch). dlogits may alias logits
// (the probabilities are never materialized); an empty dlogits computes losses only.
// Targets must lie in [-1, vocab): the dispatcher CHECKs this on the CPU; the GPU cannot check
// without a host sync, so there a target >= vocab gives loss NaN and a NaN gradient row over the
// real vocabulary, which makes the gradient norm non-finite and the step is reported as skipped.
// The GPU accumulates max and sum of exponentials in f32 over the real vocabulary only.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct CrossEntropyArgs {
  int64_t rows;
  int64_t vocab;         // real vocabulary size
  int64_t padded_vocab;  // row length of logits (>= vocab)
  float grad_scale = 1.0f;
  ConstTensorView row_weights = {};  // [rows] f32 on the stream's device, or empty (w = 1)
};

// losses: [rows] f32 (=); dlogits: [rows, padded_vocab] act (=) or empty;
// logits: [rows, padded_vocab] act; targets: [rows] i32.
void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& stream);

// Same-name twins behind the dispatcher (tests call them directly). The CPU twin takes f32, f64
// or bf16 logits/dlogits (losses f32, or f64 with f64 logits) and accumulates in double; the CUDA
// twin takes f32 or bf16.
namespace cpu {
void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& stream);
}  // namespace cpu
namespace cuda {
void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
