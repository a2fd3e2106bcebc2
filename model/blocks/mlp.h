// The transformer MLP (feed-forward) block GPT, BERT and T5 share: one TP rank's part of
//   pre = x W_in^T (+ b_in)                   [rows, in_width]   (=, saved)
//   act = Drop(f(pre))                        [rows, ffn / tp]   (=, saved: W_out's input)
//   out = act W_out^T (+ b_out, TP rank 0)    [rows, d]          (=, this rank's partial sum)
// f: gelu_tanh (GPT-2), gelu_erf (BERT), relu (T5 v1.0) on pre; a gated unit act(g) * u over
// pre = [g | u] (ops/glu.h: SwiGLU, GEGLU, ReGLU, bilinear; GEGLU-tanh = T5 v1.1). Drop is the
// optional dropout on the activation output (T5's DenseReluDense dropout; train only), Philox
// (seed, offset) numbered over this rank's [rows, ffn / tp] elements.
// Backward from d out [rows, d]: dW_in, db_in, dW_out, db_out (+=); d x [rows, d] (=), this
// rank's partial sum.
// Tensor parallelism (Megatron): W_in column-parallel (this rank's hidden units, input
// replicated), W_out row-parallel. The TP mappings stay with the caller: it gathers x before the
// forward (sequence parallelism), sums `out` over TP after it (TensorParallel::row_parallel_out),
// and d x after the backward (col_parallel_in_grad); so do the output dropout and the residual
// add, which act on the residual stream whose row layout the caller owns.
// Fast paths (CUDA, cuBLASLt epilogues): gelu_tanh with biases fuses bias + GELU into the W_in
// GEMM (kBiasGelu, writing pre); gelu_tanh without activation dropout fuses gelu' into the
// d act GEMM (kDGelu); bias gradients come out of the weight-gradient GEMM (gemm_bias_grad);
// with MlpConfig::fused_dropout, relu / gelu_erf and their dropout run as one kernel each way
// (ops/activation.h activation_dropout_*).
// Private to model/.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::model::blocks {

// The MLP's nonlinearity; kSwiglu and later are gated (act(g) * u over W_in's 2 ffn outputs).
enum class MlpActivation {
  kGeluTanh,
  kGeluErf,
  kRelu,
  kSwiglu,
  kGeglu,
  kReglu,
  kLiglu,
  kGegluTanh
};

struct MlpConfig {
  int64_t d_model = 0;
  int64_t ffn = 0;  // hidden units of the whole layer (gated: the width of act(g) * u)
  MlpActivation activation = MlpActivation::kGeluTanh;
  bool bias = false;           // b_in and b_out
  float act_dropout = 0.0f;    // dropout probability on the activation output (train only)
  bool fused_dropout = false;  // relu / gelu_erf: the activation and its dropout in one pass
  int64_t tp = 1;              // TP ranks: this one holds ffn / tp hidden units
  int64_t tp_rank = 0;         // b_out is added on rank 0 only (the partial outputs are summed)

  bool gated() const { return activation >= MlpActivation::kSwiglu; }
  int64_t local_ffn() const { return ffn / tp; }
  // W_in's output columns on this rank: [g | u] when gated.
  int64_t in_width() const { return gated() ? 2 * local_ffn() : local_ffn(); }
  // The backward needs MlpScratch::dact (d of the activation output apart from d pre).
  bool needs_dact() const { return gated() || act_dropout > 0.0f; }
};

// Values or gradients. Biases are empty without MlpConfig::bias.
struct MlpWeights {
  engine::TensorView w_in, b_in;    // [in_width, d], [in_width]
  engine::TensorView w_out, b_out;  // [d, ffn / tp], [d]
};

// Saved by the forward for the backward.
struct MlpActs {
  engine::TensorView pre;  // [rows, in_width] W_in's output
  engine::TensorView act;  // [rows, ffn / tp] after the activation dropout
};

// Backward scratch (act dtype): dpre [rows, in_width]; dact [rows, ffn / tp] when
// needs_dact(), else unused. Neither may alias the other arguments.
struct MlpScratch {
  engine::TensorView dpre, dact;
};

// The activation dropout's Philox key and counter offset (unused with act_dropout 0).
struct MlpDropoutSite {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// out [rows, d] (=, partial over TP), acts (=) from x [rows, d]. train: apply the dropout.
void mlp_forward(const MlpConfig& c, engine::TensorView out, const MlpActs& acts,
                 engine::ConstTensorView x, const MlpWeights& w, bool train,
                 const MlpDropoutSite& site, engine::Stream& s);

// dx [rows, d] (=, partial over TP) and grads (+=) from dout [rows, d] = d out, with the
// forward's x and acts (and its dropout site). dx may alias dout (read before dx is written).
void mlp_backward(const MlpConfig& c, engine::TensorView dx, const MlpWeights& grads,
                  engine::ConstTensorView dout, engine::ConstTensorView x, const MlpActs& acts,
                  const MlpWeights& w, const MlpDropoutSite& site, const MlpScratch& scratch,
                  engine::Stream& s);

// Hands out a named view (a layout's Carver: planning or creation).
using TakeView = std::function<engine::TensorView(const std::string& name, engine::DType dtype,
                                                  const std::vector<int64_t>& shape)>;

// The block's saved activations for `rows` rows in `dtype`, named prefix + "pre" / "act": the
// memory-plan entries every model carves per layer and micro-batch.
MlpActs mlp_saved_acts(const MlpConfig& c, int64_t rows, engine::DType dtype,
                       const std::string& prefix, const TakeView& take);

}  // namespace anvil::model::blocks
