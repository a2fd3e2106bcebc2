// Fused softmax + cross-entropy over a vocabulary padded to a multiple of 128, one row per token:
//   p = softmax(logits[r, :vocab]);  loss[r] = -log p[target[r]]                     (=)
//   dlogits[r, c] = grad_scale * (p[c] - [c == target[r]]) for c < vocab, 0 for padding (=)
// target < 0 marks an ignored token: loss 0, gradient row 0. grad_scale is d(total)/d(loss[r]),
// usually 1 / (number of counted tokens in the global batch). dlogits may alias logits
// (the probabilities are never materialized); an empty dlogits computes losses only.
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
};

// losses: [rows] f32 (=); dlogits: [rows, padded_vocab] act (=) or empty;
// logits: [rows, padded_vocab] act; targets: [rows] i32.
void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& stream);

}  // namespace anvil::ops
