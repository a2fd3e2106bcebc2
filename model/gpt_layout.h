// GPT-2 memory layout (private to model/): the parameter table and every buffer the model
// carves from its arenas. One function, gpt_layout(), walks the layout both for planning
// (MemoryPlan entries, no memory) and for creation (views from the arenas), so the plan equals
// what create() allocates by construction.
//
// Saved activations of layer l (one micro-batch of B*T rows, act dtype unless noted):
//   x = layer input (residual stream), ln1 (+ mean/rstd), qkv, probs [B, H, T, T], atty,
//   h = x + Drop(attn proj), ln2 (+ mean/rstd), pre_gelu and gelu [B*T, ffn].
// The attention / MLP output projections are not saved: they only feed the next fused
// residual+layernorm, and backward needs their inputs, not their outputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/arena.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/gpt.h"
#include "model/param_table.h"

namespace anvil::model::gpt_detail {

using engine::DType;
using engine::TensorView;

// One transformer block's parameters as views of one flat buffer (values or gradients).
struct LayerWeights {
  TensorView ln1_g, ln1_b;              // [d]
  TensorView qkv_w, qkv_b;              // [3d, d], [3d]
  TensorView attn_proj_w, attn_proj_b;  // [d, d], [d]
  TensorView ln2_g, ln2_b;              // [d]
  TensorView fc_w, fc_b;                // [ffn, d], [ffn]
  TensorView mlp_proj_w, mlp_proj_b;    // [d, ffn], [d]
};

struct Weights {
  TensorView wte;           // [padded_vocab, d]
  TensorView wpe;           // [max_seq_len, d]
  TensorView lnf_g, lnf_b;  // [d]
  std::vector<LayerWeights> layers;
};

struct LayerActs {
  TensorView x, ln1, qkv, probs, atty, h, ln2, pre_gelu, gelu;
  TensorView ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // [B*T] f32 (f64 with f64 activations)
};

struct Buffers {
  ParamTable table;
  // Flat [flat_numel] parameter buffers; master == value when act == grad dtype.
  TensorView value, master, grad, m, v;
  Weights w;                              // views of value
  Weights g;                              // views of grad
  TensorView tokens, positions, targets;  // [B*T] i32
  std::vector<LayerActs> layers;
  TensorView x_final, lnf, lnf_mean, lnf_rstd;  // final residual sum and ln_f
  TensorView logits;  // [B*T, padded_vocab]; after a training forward: dlogits (unscaled)
  TensorView losses;  // [B*T] f32 (f64 with f64 activations)
  // Scratch: proj holds an output projection in forward and its gradient in backward; dres is
  // the residual-stream gradient, dln a layernorm-input (or attention-output) gradient, dbig
  // [B*T * max(ffn, 3d)] the MLP hidden gradient or dqkv.
  TensorView proj, dres, dln, dbig;
  engine::Workspace op_ws;    // attention, layernorm backward, sum of squares (never concurrent)
  engine::Workspace gemm_ws;  // cuBLASLt, CUDA only
  TensorView norm_out;        // [1] grad dtype, sum of squares
};

// Hands out views (creation) or records sizes (planning). In planning mode views have the right
// shape and dtype but no data.
class Carver {
 public:
  explicit Carver(engine::MemoryPlan* plan) : plan_(plan) {}
  explicit Carver(std::vector<std::pair<std::string, engine::Arena>>* arenas) : arenas_(arenas) {}

  bool planning() const { return plan_ != nullptr; }
  TensorView take(const std::string& category, const std::string& name, DType dtype,
                  const std::vector<int64_t>& shape);
  engine::Workspace take_workspace(const std::string& category, const std::string& name,
                                   size_t bytes);
  // The first allocation error, if any.
  const absl::Status& status() const { return status_; }

 private:
  engine::Arena* arena(const std::string& category);

  engine::MemoryPlan* plan_ = nullptr;
  std::vector<std::pair<std::string, engine::Arena>>* arenas_ = nullptr;
  absl::Status status_;
};

// The GPT-2 parameter table (HF names, decay group = matrices and embeddings).
ParamTable make_param_table(const GptConfig& cfg);

// InvalidArgument for unsupported precision / shape combinations.
absl::Status check_run(const GptConfig& cfg, const GptRunShape& shape, const GptPrecision& prec);

// Walks the whole layout through `carver`. When creating, also binds the parameter views.
Buffers gpt_layout(const GptConfig& cfg, const GptRunShape& shape, const GptPrecision& prec,
                   Carver& carver);

// Dtype of layernorm statistics and per-token losses: f32, or f64 with f64 activations.
DType stat_dtype(const GptPrecision& prec);

}  // namespace anvil::model::gpt_detail
