// Token + learned position embedding.
//   forward : out[t, :] = wte[tokens[t], :] + wpe[positions[t], :]            (=)
//   backward: dwte[tokens[t], :] += dout[t, :]; dwpe[positions[t], :] += dout[t, :]   (+=)
// Positions are an explicit input so "reset position ids at EOD" needs no special case.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct EmbeddingArgs {
  int64_t tokens;   // rows of out (B*T)
  int64_t dim;      // d
  int64_t vocab;    // rows of wte (padded vocabulary)
  int64_t max_pos;  // rows of wpe
};

// out: [tokens, dim] act; tokens, positions: [tokens] i32; wte: [vocab, dim] act;
// wpe: [max_pos, dim] act. Ids out of range are a fatal CHECK on CPU, undefined on GPU.
void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream);

// dwte: [vocab, dim] f32 (+=); dwpe: [max_pos, dim] f32 (+=); dout: [tokens, dim] act.
void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 activations (f64 lets tests take finite differences; then dwte/dwpe are f64).
// cuda: bf16/f32 activations, f32 dwte/dwpe. The GPU backward scatters with f32 atomicAdd, so
// where a token (or position) repeats, dwte (dwpe) rows are summed in an unspecified order and
// the result is not bitwise reproducible run to run (differences are f32 rounding only).
namespace cpu {
void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream);
void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream);
}  // namespace cpu
namespace cuda {
void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream);
void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
