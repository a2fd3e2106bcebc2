// The embedding block's forward and backward (see embedding.h) over ops/embedding.h.
#include "model/blocks/embedding.h"

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "ops/axpy.h"
#include "ops/embedding.h"

namespace anvil::model::blocks {

namespace {

void check(const EmbeddingConfig& c, engine::ConstTensorView tokens) {
  ANVIL_CHECK_MSG(c.tp >= 1 && c.vocab % c.tp == 0 && c.tp_rank >= 0 && c.tp_rank < c.tp,
                  absl::StrCat("embedding block: vocab ", c.vocab, " over tp ", c.tp, " (rank ",
                               c.tp_rank, ")"));
  ANVIL_CHECK_MSG(tokens.numel() == c.rows, absl::StrCat("embedding block: ", tokens.numel(),
                                                         " token ids for ", c.rows, " rows"));
}

ops::EmbeddingArgs token_args(const EmbeddingConfig& c) {
  ops::EmbeddingArgs ea{c.rows, c.d_model, c.local_vocab(), c.max_positions};
  ea.vocab_start = c.vocab_start();
  return ea;
}

ops::EmbeddingArgs type_args(const EmbeddingConfig& c) {
  return {c.rows, c.d_model, c.type_vocab, 0};
}

}  // namespace

void embedding_forward(const EmbeddingConfig& c, engine::TensorView out, const EmbeddingInputs& in,
                       const EmbeddingWeights& w, engine::TensorView scratch, engine::Stream& s) {
  check(c, in.tokens);
  const bool first = c.tp_rank == 0;
  ops::embedding_forward(token_args(c), out, in.tokens, in.positions, w.wte,
                         first ? w.wpe : engine::TensorView{}, s);
  if (w.tte.empty() || !first) return;
  const int64_t n = c.rows * c.d_model;
  ANVIL_CHECK_MSG(out.is_contiguous() && scratch.is_contiguous() && scratch.numel() >= n,
                  "embedding block: out and the token-type scratch must be contiguous [rows, d]");
  ops::embedding_forward(type_args(c), scratch, in.types, {}, w.tte, {}, s);
  // out += the type term, over all elements of the (contiguous) rows.
  ops::axpy(1.0f, engine::make_view(out.data, out.dtype, out.device, {n}),
            engine::make_view(scratch.data, scratch.dtype, scratch.device, {n}), s);
}

void embedding_backward(const EmbeddingConfig& c, const EmbeddingWeights& grads,
                        engine::ConstTensorView dout, const EmbeddingInputs& in,
                        engine::Stream& s) {
  check(c, in.tokens);
  ops::embedding_backward(token_args(c), grads.wte, grads.wpe, dout, in.tokens, in.positions, s);
  if (!grads.tte.empty()) {
    ops::embedding_backward(type_args(c), grads.tte, {}, dout, in.types, {}, s);
  }
}

}  // namespace anvil::model::blocks
