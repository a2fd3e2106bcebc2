// Token + learned position embedding, vocab-parallel capable (Megatron VocabParallelEmbedding).
// wte holds the token rows [vocab_start, vocab_start + vocab) of the (padded) vocabulary; with
// tensor parallelism each TP rank holds one such slice and the outputs are summed over TP.
//   local(id) = id - vocab_start if vocab_start <= id < vocab_start + vocab, else none
//   forward : out[t, :] = (local(tokens[t]) ? wte[local(tokens[t]), :] : 0)
//                         + (wpe given ? wpe[positions[t], :] : 0)                          (=)
//   backward: dwte[local(tokens[t]), :] += dout[t, :]   (tokens of other shards add nothing)
//             dwpe[positions[t], :] += dout[t, :]       (only when dwpe is given)         (+=)
// Positions are an explicit input so "reset position ids at EOD" needs no special case.
// With TP (forward all-reduces out over TP), pass wpe to one TP rank only so the sum counts the
// position term once. In the backward dout is the same on every TP rank, so every rank that
// passes dwpe gets the full (replicated) position gradient, and each rank's dwte its own rows.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct EmbeddingArgs {
  int64_t tokens;           // rows of out (B*T)
  int64_t dim;              // d
  int64_t vocab;            // rows of wte (the whole padded vocabulary, or this rank's slice)
  int64_t max_pos;          // rows of wpe (may be 0 when wpe is empty)
  int64_t vocab_start = 0;  // global token id of wte's row 0
};

// out: [tokens, dim] act (=); tokens: [tokens] i32; positions: [tokens] i32, or empty when wpe
// is empty; wte: [vocab, dim] act; wpe: [max_pos, dim] act, or empty (no position term).
// A token id outside [vocab_start, vocab_start + vocab) gives a zero wte row (it belongs to
// another rank). A negative token id and a position outside [0, max_pos) are a fatal CHECK on
// the CPU; on the GPU a negative token id gives a zero row and a bad position is undefined.
void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream);

// dwte: [vocab, dim] f32 (+=); dwpe: [max_pos, dim] f32 (+=), or empty (no position gradient);
// dout: [tokens, dim] act; tokens: [tokens] i32; positions: [tokens] i32, or empty when dwpe
// is empty. Ids as in the forward.
void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 activations (f64 lets tests take finite differences; then dwte/dwpe are f64).
// cuda: bf16/f32 activations, f32 dwte/dwpe. The GPU backward sorts the ids (scratch in
// stream.gemm_workspace()) and adds each id's rows in token order, bitwise equal to the CPU
// twin and reproducible; only without a GEMM workspace large enough for the sort does it fall
// back to an f32 atomicAdd scatter (then repeated ids sum in an unspecified order).
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
