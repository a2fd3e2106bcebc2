// The transformer layer GPT, BERT and T5 share, built from the attention, MLP and norm blocks,
// with tensor and sequence parallelism (parallel/tensor_parallel.h: the residual stream holds
// this rank's rows; each norm output is gathered before the column-parallel GEMM that reads it,
// each row-parallel output reduced (-scattered) after) and a dropout on each sub-layer output
// (train only; Philox numbered over the whole rows, so a sequence-parallel rank draws the
// single-rank masks). Drop = that dropout, N1 / Nc / Nm the norms of the attention, cross and
// MLP sub-layers (LayerNorm or RMSNorm):
//   pre-LN  (GPT, T5):  h = x + Drop(attn(N1(x)));  [hc = h + Drop(cross(Nc(h), memory))]
//                       y = h' + Drop(mlp(Nm(h')))  with h' = hc (cross) or h
//           The last residual add is left pending: the forward ends with h' (acts) and
//           Drop(mlp) (this rank's rows of scratch.proj); the next layer's forward fuses
//           y into N1 (`fused`), a stack's end into its final norm.
//   post-LN (BERT):     h = x + Drop(attn(x));  u = N1(h);  out = Nm(u + Drop(mlp(u)))
// Backward runs the exact reverse from dres = d y (pre-LN) or d out (post-LN) and leaves
// d x in dres; parameter gradients (+=), d memory (+=, partial over TP, cross only) and the
// relative table's f32 gradient (+=, self-attention with relative buckets) accumulate.
// Full recomputation is the caller's: it reruns the forward from the kept x before the
// backward (same dropout sites, same masks); selective recomputation is the attention block's.
// Private to model/.
#pragma once

#include <cstdint>
#include <string>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/blocks/attention.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "parallel/tensor_parallel.h"

namespace anvil::model::blocks {

struct LayerConfig {
  NormArgs norm;  // over this rank's rows of the residual stream
  AttentionConfig attn;
  bool cross = false;  // a cross-attention sub-layer (decoder)
  AttentionConfig cross_attn;
  MlpConfig mlp;
  bool post_ln = false;
  float dropout = 0.0f;  // on each sub-layer's output
};

// Values or gradients; the LayerNorm betas are empty with RMSNorm, the cross ones without cross.
struct LayerWeights {
  engine::TensorView ln1_g, ln1_b, ln_cross_g, ln_cross_b, ln_mlp_g, ln_mlp_b;
  AttentionWeights attn, cross;
  MlpWeights mlp;
};

// Saved by the forward; [rows, d] are this rank's rows, [R, d] all rows of the micro-batch.
struct LayerActs {
  engine::TensorView x;  // [rows, d] the input
  // pre-LN: N1(x) [R, d]; post-LN: x gathered (sequence parallelism only, else empty).
  engine::TensorView ln1;
  engine::TensorView ln1_mean, ln1_rstd;  // [rows]: N1's statistics (mean: LayerNorm)
  AttentionActs attn;
  engine::TensorView h;                                       // [rows, d] x + Drop(attn)
  engine::TensorView ln_cross, ln_cross_mean, ln_cross_rstd;  // Nc(h) [R, d] (cross only)
  AttentionActs cross;
  engine::TensorView hc;  // [rows, d] h + Drop(cross) (cross only)
  // The MLP input [R, d]: Nm(h') pre-LN, u = N1(h) post-LN; the statistics are Nm's.
  engine::TensorView ln_mlp, ln_mlp_mean, ln_mlp_rstd;
  MlpActs mlp;
  engine::TensorView post_sum;  // [rows, d] u + Drop(mlp) (post-LN)
};

// Per micro-batch: the attention inputs (positions, masks), the memory [kv_rows, d_mem] and,
// backward, where d memory (+=) and the relative table's gradient (+=) go.
struct LayerInputs {
  AttentionInputs attn, cross;
  engine::ConstTensorView memory;
  engine::TensorView dmemory, d_rel_table;
};

// The Philox key and the base counter offsets of the layer's dropout sites.
struct LayerSites {
  uint64_t seed = 0;
  uint64_t attn_probs = 0, attn_out = 0, cross_probs = 0, cross_out = 0, mlp_act = 0, mlp_out = 0;
};

// Scratch (act dtype), contiguous: proj [R, d] (each sub-layer's partial output; forward leaves
// the pending Drop(mlp) in its rows of this rank); dln [R, d] (d of a sub-layer input); dbig
// >= R * max(3 I, MLP in_width) elements, and R I + kv_rows 2 I with cross; dact [R, ffn / tp]
// when the MLP needs_dact(). ws: the ops' workspace.
struct LayerScratch {
  engine::TensorView proj, dln, dbig, dact;
  engine::Workspace ws;
};

// The residual that the pending Drop(mlp) is added to: hc with cross, else h (pre-LN).
inline engine::TensorView last_residual(const LayerConfig& c, const LayerActs& a) {
  return c.cross ? a.hc : a.h;
}

// The layer's saved activations (act dtype; statistics in stat_dtype; lse f32), named prefix +
// "x", "ln1", "ln1.mean", "ln1.rstd", "attn." (attention.h), "h", "ln_cross"..., "cross.", "hc",
// "ln_mlp"..., "mlp." (mlp.h), "post_sum": the memory-plan entries of one layer and micro-batch.
// Means with LayerNorm only; post-LN keeps ln1 only under sequence parallelism (norm rows <
// all rows).
LayerActs layer_saved_acts(const LayerConfig& c, engine::DType dtype, engine::DType stat_dtype,
                           const std::string& prefix, const TakeView& take);

// Pre-LN: prev empty: x = acts.x is given; else x (=) = prev + this rank's rows of scratch.proj
// (the previous layer's last residual and pending Drop(mlp)). Post-LN: out [rows, d] (=).
void layer_forward(const LayerConfig& c, const LayerActs& acts, const LayerWeights& w,
                   const LayerInputs& in, engine::ConstTensorView prev, engine::TensorView out,
                   bool train, const LayerSites& sites, const LayerScratch& scratch,
                   const parallel::TensorParallel& tp, engine::Stream& s);

// dres [rows, d]: d y (pre-LN) or d out (post-LN) in, d x out.
void layer_backward(const LayerConfig& c, engine::TensorView dres, const LayerWeights& grads,
                    const LayerActs& acts, const LayerWeights& w, const LayerInputs& in,
                    const LayerSites& sites, const LayerScratch& scratch,
                    const parallel::TensorParallel& tp, engine::Stream& s);

}  // namespace anvil::model::blocks
