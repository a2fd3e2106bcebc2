// GPT-2 memory layout (private to model/): the parameter table and every buffer the model
// carves from its arenas. One function, gpt_layout(), walks the layout both for planning
// (MemoryPlan entries, no memory) and for creation (views from the arenas), so the plan equals
// what create() allocates by construction.
//
// Saved activations of layer l (one micro-batch of B*T rows, act dtype unless noted):
//   x = layer input (residual stream), ln1 (+ mean/rstd), qkv, the attention's softmax
//   statistics lse [B, H, T] f32 (flash attention) or its probabilities [B, H, T, T] (the
//   unfused path, see uses_flash_attention), with attention dropout and
//   Precision::save_dropout_mask the flash dropout keep bits attn.keep [B H T T / 8 bytes] i32,
//   atty, h = x + Drop(attn proj), ln2 (+ mean/rstd),
//   the MLP block's pre [B*T, ffn] (GLU: [B*T, 2 ffn] = g | u) and act (the activation's
//   output) [B*T, ffn], named mlp.pre / mlp.act (model/blocks/mlp.h).
// RMSNorm keeps no means (the mean fields stay empty). Post-LN layers (BERT) reuse the fields
// (see LayerActs) and keep post_sum; BERT's heads keep theirs in HeadActs.
// Each chunk has act_slots such sets (pipeline micro-batches in flight). Recomputation shares
// one set among all layers and slots: the probabilities (selective; flash attention keeps only
// lse, so selective recomputes nothing) or everything but x (full).
// The attention / MLP output projections are not saved: they only feed the next fused
// residual+layernorm, and backward needs their inputs, not their outputs.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/blocks/mlm_head.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "model/carver.h"
#include "model/param_table.h"
#include "model/pass_support.h"
#include "model/stack/gpt_config.h"
#include "parallel/grad_sync.h"

namespace anvil::model::gpt_detail {

using engine::DType;
using engine::TensorView;

// One transformer block's parameters as views of one flat buffer (values or gradients). Biases
// are empty without cfg.bias.
struct LayerWeights {
  TensorView ln1_g, ln1_b;              // [d]
  TensorView qkv_w, qkv_b;              // [3d / tp, d], [3d / tp] (local heads' q | k | v)
  TensorView attn_proj_w, attn_proj_b;  // [d, d / tp], [d]
  TensorView ln2_g, ln2_b;              // [d]
  TensorView fc_w, fc_b;                // [ffn / tp, d], [ffn / tp]
  TensorView mlp_proj_w, mlp_proj_b;    // [d, ffn / tp], [d]
};

// BERT's heads (post; model/blocks/mlm_head.h, run by model/stack/mlm_head.cc), replicated over
// TP except the output bias: lm_head.dense, lm_head.layernorm, lm_head.bias, pooler.dense,
// binary_head.

struct Weights {
  TensorView wte;                    // [padded_vocab / tp, d] (pre, or post when tied)
  TensorView tte;                    // [type_vocab_size, d] (pre, BERT) token types
  TensorView wpe;                    // [max_seq_len, d] (pre, learned positions)
  TensorView wte_ln_g, wte_ln_b;     // [d] (pre, embed_layernorm)
  TensorView lm_head;                // [padded_vocab / tp, d] (post): lm_head.weight or wte
  TensorView lnf_g, lnf_b;           // [d] (post, pre-LN)
  blocks::MlmHeadWeights bert;       // (post, BERT)
  std::vector<LayerWeights> layers;  // by local layer index
};

// Saved activations of one layer for one micro-batch (TP: local heads / hidden units).
struct LayerActs {
  TensorView x, h;      // [rows, d] (sequence parallel: B*T/tp)
  TensorView ln1, ln2;  // [B*T, d]
  TensorView qkv;       // [B*T, 3d / tp]
  TensorView lse;       // [B, H / tp, T] f32 (flash)
  TensorView keep;      // [blocks::dropout_keep_words] i32: flash dropout keep bits, or empty
  TensorView probs;     // [B, H / tp, T, T] (unfused path)
  TensorView atty;      // [B*T, d / tp]
  blocks::MlpActs mlp;  // pre [B*T, c_fc out / tp] (GLU: g | u), act [B*T, ffn / tp]
  TensorView ln1_mean, ln1_rstd, ln2_mean, ln2_rstd;  // [rows] f32 (f64 with f64 activations)
  // Post-LN (model/stack/gpt_post_ln.cc) reuses the fields: ln1 = x gathered (sequence parallel
  // only), h = x + Drop(attn) (LN1's input), ln2 = LN1(h) gathered (the MLP input), post_sum =
  // ln2 + Drop(mlp) [rows, d] (LN2's input; LN2's output is the next layer's x).
  TensorView post_sum;
};

// The MLP block (model/blocks/mlp.h) of every layer: c_fc = W_in, c_proj = W_out, the
// activation and biases of cfg, this shard's TP split; no activation dropout (GPT drops the
// block's output, on the residual stream).
blocks::MlpConfig mlp_config(const GptConfig& cfg, const GptShard& shard);
// BERT's heads (model/blocks/mlm_head.h) on the B*T rows of a micro-batch of `shape`.
blocks::MlmHeadConfig mlm_head_config(const GptConfig& cfg, const GptRunShape& shape);
// The norm block (model/blocks/norm.h) of cfg.norm over `rows` rows of the residual stream.
inline blocks::NormArgs norm_args(const GptConfig& cfg, int64_t rows) {
  return {cfg.layernorm() ? blocks::NormKind::kLayerNorm : blocks::NormKind::kRmsNorm, rows,
          cfg.d_model, cfg.ln_eps};
}

// A layer's MLP parameters (values or gradients) as the block takes them.
inline blocks::MlpWeights mlp_weights(const LayerWeights& w) {
  return {w.fc_w, w.fc_b, w.mlp_proj_w, w.mlp_proj_b};
}

// Views of one flat buffer's parameters (field: &Param::value, &Param::grad) of a table made
// by make_param_table(cfg, shard), found by name (layers in the shard's chunk order).
Weights weights_of(const ParamTable& t, TensorView Param::*field, const GptConfig& cfg,
                   const GptShard& shard);

// Flash attention (ops/flash_attention.h) wherever it runs: always on the CPU; on CUDA where
// ops::flash_attention_cuda_supports says so (bf16 or fp16, head_dim a multiple of 8 in [32, 256]).
// Elsewhere the unfused op (ops/attention.h) runs.
bool uses_flash_attention(const GptConfig& cfg, const Precision& prec);

// One micro-batch's inputs on the device, [B*T] i32 each; BERT also token_types [B*T], lengths
// and binary_labels [B] i32.
struct SlotData {
  TensorView tokens, positions, targets, segments;
  TensorView token_types, lengths, binary_labels;
  TensorView prefix_end;    // [B*T] i32 (GptBatch::prefix_end)
  TensorView loss_weights;  // [B*T] f32 (GptBatch::loss_weights)
  bool has_segments = false;
  bool has_prefix = false;
  bool has_weights = false;
  int64_t counted = 0;          // BERT: targets >= 0 of the micro-batch (host count)
  uint64_t dropout_offset = 0;  // of the slot's last forward
};

// The end of the model for one micro-batch (post only).
struct HeadActs {
  TensorView x_final;             // [rows, d] final residual sum
  TensorView lnf;                 // [B*T, d] ln_f
  TensorView lnf_mean, lnf_rstd;  // [rows] stat dtype
  TensorView logits;              // [B*T, padded / tp]; after a training forward: dlogits
  TensorView losses;              // [B*T] stat dtype
  // BERT (model/stack/mlm_head.cc). lnf is the heads' input: LNf(x_final) (pre-LN) or x_final
  // (post-LN; gathered with sequence parallelism, else x_final itself).
  blocks::MlmHeadActs mlm;
};

// The embedding LayerNorm's saved input and statistics for one micro-batch (pre, embed_layernorm).
struct EmbedActs {
  TensorView sum;         // [rows, d] word embedding (summed over TP)
  TensorView mean, rstd;  // [rows] stat dtype
};

struct Buffers {
  ParamTable table;
  // The flat parameter buffers and the ZeRO scratch (parallel/grad_sync.h; model/sync_layout.h):
  // value, master, grad, m, v [flat_numel], or under ZeRO stage z over dp ranks shards
  // [flat_numel / dp] (master, m, v from z = 1, value at z = 3; grad absent from z = 2, the
  // reduced gradients in grad_shard).
  std::vector<parallel::SyncBucket> sync_buckets;  // the table's buckets ("h.*": layers)
  parallel::SyncLayout sync_layout;
  parallel::SyncBuffers flat;
  std::vector<int64_t> layer_bucket;  // bucket index of each local layer
  std::vector<size_t> layer_param;    // index in table.all() of each local layer's first param
  std::vector<TensorView LayerWeights::*> layer_fields;  // a layer's parameters, in table order
  Weights w;                                             // views of value
  Weights g;                                             // views of grad
  std::vector<int64_t> layer_ids;                        // global index of each local layer
  std::vector<std::vector<int64_t>> chunk_layers;        // local layer indices per chunk
  int64_t slots = 1;
  std::vector<SlotData> data;    // [chunks * slots]
  std::vector<LayerActs> acts;   // [slots * local layers]: acts[slot * layers + local]
  std::vector<HeadActs> head;    // [slots] when post
  std::vector<EmbedActs> embed;  // [slots] when pre with embed_layernorm
  // d(chunk output) received from the next stage, [chunks * slots] (empty for the post chunk).
  std::vector<TensorView> out_grad;
  TensorView send_act;  // [B*T, d] output of a non-final chunk
  // Scratch: proj holds an output projection in forward and its gradient in backward; dres is
  // the residual-stream gradient, dln a layernorm-input (or attention-output) gradient, dbig
  // [B*T * max(ffn, 3d) / tp] the MLP hidden gradient or dqkv; stat [B*T] and ce [3, B*T]
  // (row max, sum of exponentials, target logit of the vocab-parallel cross-entropy).
  // With sequence parallelism the residual stream (x, h, x_final, dres, chunk transfers) and
  // layernorm statistics hold this TP rank's rows only; gathered [B*T, d] collects a gradient's
  // rows before a row-parallel weight gradient.
  // dglu [B*T, ffn / tp] is d(activation output) of a gated MLP.
  TensorView proj, dres, dln, dbig, dglu, stat_mean, stat_rstd, ce, gathered;
  // BERT's binary head: rows b*T of the [CLS] tokens and 0..B-1 ([B] i32, set by
  // mlm_head_setup), d(pooler) scratch and the [CLS] rows' summed gradient ([B, d] act each).
  TensorView cls_rows, batch_rows, dcls, dcls_other;
  TensorView bias_sums;       // [padded / tp] grad dtype: BERT's bias gradients before scaling
  engine::Workspace op_ws;    // attention, layernorm backward, sum of squares (never concurrent)
  engine::Workspace gemm_ws;  // cuBLASLt, CUDA only
  TensorView norm_out;        // [1] grad dtype, sum of squares

  SlotData& slot_data(int64_t chunk, int64_t slot) {
    return data[static_cast<size_t>(chunk * slots + slot)];
  }
  LayerActs& act(int64_t slot, int64_t local) {
    return acts[static_cast<size_t>(slot * static_cast<int64_t>(layer_ids.size()) + local)];
  }
};

// The parameter table of `shard` (HF names with global layer numbers, local TP shapes, decay
// group = matrices and embeddings); the default shard is the whole model.
ParamTable make_param_table(const GptConfig& cfg, const GptShard& shard = {});

// InvalidArgument for unsupported precision / shape combinations, and for a micro-batch whose
// largest activation exceeds engine::kMaxElements (cfg.validate() bounds the rest).
absl::Status check_run(const GptConfig& cfg, const GptRunShape& shape, const Precision& prec,
                       const GptShard& shard);

// Rows of the residual stream this rank holds: B*T, or B*T / tp with sequence parallelism.
int64_t local_rows(const GptRunShape& shape, const GptShard& shard);

// Views of local layer `local`'s parameters inside `bucket_base`, a buffer holding that layer's
// bucket (flat elements [bucket begin, bucket end)).
LayerWeights layer_views(const Buffers& b, int64_t local, TensorView bucket_base);

// Walks the whole layout through `carver`. When creating, also binds the parameter views.
Buffers gpt_layout(const GptConfig& cfg, const GptRunShape& shape, const Precision& prec,
                   const GptShard& shard, Carver& carver);

}  // namespace anvil::model::gpt_detail
