// The embedding block GPT, BERT and T5 share: one TP rank's part of
//   out = wte[token] (this rank's vocabulary slice, else 0)
//         + wpe[position] + tte[type]   (TP rank 0 only, so the sum over TP counts them once)
// over rows r (tokens) of [rows, d] (=, this rank's partial sum). wpe (learned positions, GPT-2,
// BERT) and tte (token types, BERT) are optional (empty views). Backward from d out [rows, d]
// (the whole gradient, the same on every TP rank): d wte += on this rank's slice; d wpe and d tte
// += on every rank that passes them (each gets the full, replicated gradient).
// The vocab-parallel sum over TP (Megatron's VocabParallelEmbedding all-reduce, or its
// reduce-scatter under sequence parallelism), an embedding LayerNorm and the dropout after the
// sum stay with the caller, which owns the residual stream's row layout; so does gathering
// d out before the backward. The block saves no activations: its backward reads the ids only.
// Private to model/.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::model::blocks {

struct EmbeddingConfig {
  int64_t rows = 0;  // tokens (batch * seq)
  int64_t d_model = 0;
  int64_t vocab = 0;          // the whole (padded) vocabulary
  int64_t max_positions = 0;  // rows of wpe (0 without learned positions)
  int64_t type_vocab = 0;     // rows of tte (0 without token types)
  int64_t tp = 1, tp_rank = 0;

  int64_t local_vocab() const { return vocab / tp; }
  int64_t vocab_start() const { return tp_rank * local_vocab(); }
};

// Values or gradients: wte [vocab / tp, d] (this rank's slice), wpe [max_positions, d], tte
// [type_vocab, d]; wpe and tte may be empty.
struct EmbeddingWeights {
  engine::TensorView wte, wpe, tte;
};

// One micro-batch's ids on the stream's device, [rows] i32 each: tokens, positions (read with
// wpe), token types (read with tte).
struct EmbeddingInputs {
  engine::ConstTensorView tokens, positions, types;
};

// out [rows, d] (=, partial over TP) from the ids. scratch [rows, d] (act dtype) holds the
// token-type term before it is added (used with tte on TP rank 0 only; must not alias out).
void embedding_forward(const EmbeddingConfig& c, engine::TensorView out, const EmbeddingInputs& in,
                       const EmbeddingWeights& w, engine::TensorView scratch, engine::Stream& s);

// grads (+=) from dout [rows, d] and the forward's ids; empty gradient views are skipped.
void embedding_backward(const EmbeddingConfig& c, const EmbeddingWeights& grads,
                        engine::ConstTensorView dout, const EmbeddingInputs& in, engine::Stream& s);

}  // namespace anvil::model::blocks
