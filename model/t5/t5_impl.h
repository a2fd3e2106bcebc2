// T5Model's private state (model/t5/t5.cc: layout, creation, optimizer; model/t5/t5_pass.cc:
// forward/backward). Not part of the public API.
//
// Saved activations (per activation slot: one micro-batch in flight; Re = B*Te encoder rows,
// Rd = B*Td decoder rows, re / rd = the rows this TP rank holds of them: Re / tp, Rd / tp with
// sequence parallelism, else Re, Rd; act dtype unless noted; rstd: [local rows] stat dtype;
// lse: [B, H, T] f32; TP: I, H, d_ff, wi_out are this rank's; layers and ends of this pipeline
// stage only):
//   encoder layer: x (input) [re, d], ln1 [Re, d] (gathered), rstd1, qkv [Re, 3I], lse,
//                  att [Re, I], h [re, d], ln2 [Re, d], rstd2, ffn.pre [Re, wi_out] (wi's output),
//                  ffn.act [Re, d_ff] (activation output after its dropout: wo's input)
//   decoder layer: x [rd, d], ln1 [Rd, d], rstd1, qkv [Rd, 3I], lse, att, h (= h1) [rd, d], ln2,
//                  rstd2, cq [Rd, I], ckv [Re, 2I] (k | v of the encoder output),
//                  clse [B, H, Td], catt [Rd, I], h2 [rd, d], ln3, rstd3, pre, act
//   both: with dropout and Precision::save_dropout_mask the flash dropout keep bits of self
//                  (keep, B H T T / 8 bytes) and cross attention (ckeep, B H Td Te / 8) i32
//                  With recompute full only x is kept per layer and slot; one set of the rest
//                  per stack ("recompute.encoder.*", "recompute.decoder.*" in the plan) serves
//                  every layer and slot.
//   ends:          x_enc [re, d] (encoder's last residual sum), enc_norm [re, d] (= RMSf_enc,
//                  before its dropout), enc [Re, d] (after it, gathered: what cross-attention
//                  reads; on decoder stages the received copy), and the same three for the
//                  decoder (dec [Rd, d] is the LM head's input), logits, losses [Rd] stat dtype
//   received grads: dout (d stage output) [r, d], denc_in (d enc of later decoder stages) [re, d]
// Scratch: proj [max(Re, Rd), d] (a projection's output, or its gradient: the rows this rank
// holds after the TP sum), dres [max local rows, d], dln [max rows, max(d, I)], dbig [max rows,
// max(3I, wi_out)], dact [max rows, d_ff] (d of the FFN activation output; gated or with dropout
// only), denc [Re, d] (d enc, summed over the decoder layers), gathered [max rows, d] (sequence
// parallelism: a gradient's rows gathered for a weight gradient), rel_f32 / drel_f32 [2, buckets,
// H] f32 (the relative tables as the attention op takes them), rel_grad [buckets * H] grad dtype.
// out [r, d]: the stage's output hidden (pipeline), shared_sum: zeros standing in for a shared
// parameter's gradient this stage has no copy of (sum_shared_grads).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/status.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/blocks/embedding.h"
#include "model/blocks/layer.h"
#include "model/blocks/lm_head.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "model/carver.h"
#include "model/pass_support.h"
#include "model/run_options.h"
#include "model/t5/t5.h"
#include "ops/flash_attention.h"
#include "parallel/grad_sync.h"
#include "parallel/offload_optimizer.h"
#include "parallel/tensor_parallel.h"

namespace anvil::model::t5_detail {

using engine::DType;
using engine::TensorView;

// The FFN (model/blocks/mlp.h) of every layer: wi = W_in, wo = W_out, no biases, ReLU (v1.0)
// or gated tanh GELU (v1.1), the dropout on its activation output, this shard's TP split.
blocks::MlpConfig ffn_config(const T5Config& cfg, const T5Shard& shard);

// One block's parameters (values or gradients). Decoder-only fields stay empty in the encoder.
struct LayerWeights {
  TensorView ln1, qkv, o;       // [d], [3I, d], [d, I]: self-attention
  TensorView ln2, cq, ckv, co;  // decoder: [d], [I, d], [2I, d], [d, I]: cross-attention
  TensorView ln_ff, wi, wo;     // [d], [wi_out, d], [d, d_ff]
};

// A layer's FFN parameters (values or gradients) as the block takes them.
inline blocks::MlpWeights ffn_weights(const LayerWeights& w) { return {w.wi, {}, w.wo, {}}; }

struct Weights {
  TensorView shared;     // [padded, d]
  TensorView lm_head;    // [padded, d]: shared (tied) or lm_head.weight
  TensorView rel_enc;    // [buckets, H] encoder layer 0's relative table
  TensorView rel_dec;    // [buckets, H] decoder layer 0's
  TensorView enc_final;  // [d]
  TensorView dec_final;  // [d]
  std::vector<LayerWeights> enc, dec;
};

struct LayerActs {
  TensorView x, ln1, rstd1, qkv, lse, att, h;
  TensorView ln2, rstd2, cq, ckv, clse, catt, h2;  // decoder only
  TensorView keep, ckeep;     // dropout keep bits of self / cross attention (i32), or empty
  TensorView ln_ff, rstd_ff;  // ln2 (encoder) or ln3
  blocks::MlpActs ffn;        // the FFN block's pre, act
};

// One activation slot: a micro-batch's inputs, saved activations and received gradients.
struct SlotActs {
  std::vector<LayerActs> enc_layers, dec_layers;  // Le / Ld entries, this stage's bound
  // Inputs on the device.
  TensorView enc_tokens, dec_tokens, labels, enc_lengths;  // [Re], [Rd], [Rd] i32, [B] i32
  TensorView x_enc, enc_norm, enc_rstd, enc;               // [Re, d] ..., rstd [Re]
  TensorView x_dec, dec_norm, dec_rstd, dec;               // [Rd, d] ...
  TensorView logits, losses;                               // [Rd, padded], [Rd]
  TensorView dout, denc_in;                                // received: [R, d], [Re, d] (pipeline)
  bool has_lengths = false;                                // the batch gave enc_lengths
  bool ready_for_backward = false;
  uint64_t dropout_offset = 0;
};

struct Buffers {
  ParamTable table;
  // The flat parameter buffers and the ZeRO scratch (parallel/grad_sync.h, model/sync_layout.h):
  // [flat_numel] each, or under ZeRO stage z shards (master, m, v from 1, value at 3; grad
  // replaced by the reduced own pieces and one layer's scratch from 2). The layer buckets are
  // the blocks but each stack's block 0, which holds the relative table all blocks read (and
  // whose gradient is added after the stack's backward): it stays whole, as the embeddings.
  std::vector<parallel::SyncBucket> sync_buckets;
  parallel::SyncLayout sync_layout;
  parallel::SyncBuffers flat;
  std::vector<int64_t> enc_bucket, dec_bucket;  // per block: its layer bucket, or -1
  Weights w, g;  // views of the values, the gradients (a sharded layer's: bound by the sync)
  std::vector<SlotActs> slots;
  TensorView rel_buckets_enc, rel_buckets_dec;  // [2Te - 1], [2Td - 1] i32
  TensorView out, shared_sum;
  TensorView proj, dres, dln, dbig, dact, denc, gathered;
  TensorView rel_f32, drel_f32, rel_grad;
  TensorView ce;  // [3, Rd] stat dtype: row max, sum of exponentials, target logit (tp > 1)
  engine::Workspace op_ws, gemm_ws;
  TensorView norm_out;  // [1] grad dtype
};

// The parameter table of `shard` (HF names; see t5.h for the fused matrices; local TP shapes),
// buckets: "embeddings", each encoder and decoder block, "final" (final norms, lm_head), and on
// a pipeline stage whose stack starts past block 0 "{encoder,decoder}.relative_attention_bias"
// (its copy of block 0's table) first; only the stage's parameters. The default shard is the
// whole model.
ParamTable make_t5_param_table(const T5Config& cfg, const T5Shard& shard = {});
// A parameter held by several pipeline stages (the shared embedding, a relative table), with
// the stages holding a copy (in order; at least two).
struct SharedParam {
  std::string name;
  int64_t numel;
  std::vector<int> stages;
};
std::vector<SharedParam> pipeline_shared_params(const T5Config& cfg, const T5Shard& shard);
// Block l's views inside `base`, a flat view of its bucket `bucket` of table t.
LayerWeights bucket_layer_views(const ParamTable& t, bool decoder, int64_t l, int64_t bucket,
                                TensorView base);
// Walks the whole layout through `carver`; when creating, also binds the parameter views.
Buffers t5_layout(const T5Config& cfg, const T5RunShape& shape, const Precision& prec,
                  const T5Shard& shard, Carver& carver);
// InvalidArgument for unsupported precision / shape / shard combinations.
absl::Status check_t5_run(const T5Config& cfg, const T5RunShape& shape, const Precision& prec,
                          const T5Shard& shard);

}  // namespace anvil::model::t5_detail

namespace anvil::model {

struct T5Model::Impl {
  T5Config cfg;
  T5RunShape shape;
  Precision prec;
  T5Shard shard;
  uint64_t seed = 0;
  std::vector<std::pair<std::string, engine::Arena>> arenas;
  t5_detail::Buffers buf;
  parallel::TensorParallel tp;                 // the TP group's mappings; gathers into buf.gathered
  T5StageLayers layers;                        // this pipeline stage's
  int64_t slot = 0;                            // of the forward / backward running
  int64_t last_forward = 0;                    // the slot of the last forward_stage
  uint64_t dropout_offset = 0;                 // the running slot's
  std::vector<t5_detail::SharedParam> shared;  // held by several stages (pipeline)
  // Gradient sync over DP (plain DP or ZeRO 1-3); its layers: encoder blocks, then decoder
  // blocks, of this stage with a layer bucket (sync_layer).
  // Optimizer offload: the host master / m / v that buf.flat's views point at (null: none).
  std::unique_ptr<parallel::OffloadOptimizer> offload;
  std::unique_ptr<parallel::GradSync> sync;
  std::vector<std::pair<bool, int64_t>> sync_layers;  // (decoder, block) of each sync layer
  // Dropout sites per forward: encoder embedding, 4 per encoder layer (attention probabilities,
  // attention output, FFN hidden, FFN output), encoder final; decoder embedding, 6 per decoder
  // layer (+ cross-attention probabilities and output), decoder final.
  uint64_t site_stride = 0;
  int64_t n_sites() const { return 4 + 4 * cfg.n_encoder_layers + 6 * cfg.n_decoder_layers; }
  uint64_t site_offset(int64_t site) const {
    return (dropout_offset * static_cast<uint64_t>(n_sites()) + static_cast<uint64_t>(site)) *
           site_stride;
  }
  int64_t enc_site(int64_t l, int64_t k) const { return 1 + 4 * l + k; }
  int64_t dec_site(int64_t l, int64_t k) const { return 3 + 4 * cfg.n_encoder_layers + 6 * l + k; }

  t5_detail::SlotActs& act() { return buf.slots[static_cast<size_t>(slot)]; }
  // Makes `slot` the running one (CHECK: within act_slots).
  t5_detail::SlotActs& use_slot(int64_t k) {
    ANVIL_CHECK_MSG(k >= 0 && k < shard.act_slots, "T5Model: slot " + std::to_string(k) +
                                                       " outside [0, act_slots " +
                                                       std::to_string(shard.act_slots) + ")");
    slot = k;
    return act();
  }
  bool has_enc() const { return layers.enc_end > layers.enc_begin; }
  bool has_dec() const { return layers.dec_end > layers.dec_begin; }
  bool embeds_enc() const { return has_enc() && layers.enc_begin == 0; }
  bool ends_enc() const { return has_enc() && layers.enc_end == cfg.n_encoder_layers; }
  bool embeds_dec() const { return has_dec() && layers.dec_begin == 0; }
  bool post() const { return has_dec() && layers.dec_end == cfg.n_decoder_layers; }
  bool pipelined() const { return shard.pp > 1; }

  void set_batch(const T5Batch& batch, engine::Stream& s);
  void forward(bool train, engine::Stream& s);
  void backward(float grad_scale, engine::Stream& s);
  void encoder_forward(bool train, engine::Stream& s);
  void decoder_forward(bool train, engine::Stream& s);
  void decoder_backward(float grad_scale, engine::Stream& s);
  void encoder_backward(engine::Stream& s);
  // x [rows, d] (=, this rank's rows) = Drop(shared[tokens]) summed over TP (vocab-parallel);
  // tokens: [R] i32 of all rows.
  void embed(engine::TensorView x, engine::TensorView tokens, bool train, int64_t site,
             engine::Stream& s);
  // Its backward from d x in dres (through the dropout in place): shared's gradient (+=).
  // Both through the embedding block (model/blocks/embedding.h) over `rows` token ids.
  void embed_backward(engine::TensorView dres, engine::TensorView tokens, int64_t site,
                      engine::Stream& s);
  blocks::EmbeddingConfig embedding_config(int64_t rows) const;
  // A stack's end: sum = h + proj (=), norm = RMS(sum) (=), this rank's rows of out [R, d] (=)
  // = Drop(norm) (the caller gathers out where all rows are read); all but out [rows, d].
  void final_norm(engine::TensorView sum, engine::TensorView norm, engine::TensorView rstd,
                  engine::TensorView out, engine::TensorView h, engine::TensorView proj,
                  engine::TensorView gamma, bool train, int64_t site, engine::Stream& s);
  // Its backward: from d(this rank's rows of out) in dout (through the dropout in place), dres
  // (=) = d sum, dgamma (+=).
  void final_norm_backward(engine::TensorView dres, engine::TensorView dout, engine::TensorView sum,
                           engine::TensorView rstd, engine::TensorView gamma,
                           engine::TensorView dgamma, int64_t site, engine::Stream& s);
  // The relative tables' f32 gradients into the parameter gradients this stage holds.
  void add_relative_grads(engine::Stream& s);
  // Creates `sync` over buf's buckets.
  absl::Status setup_grad_sync();
  // The sync's index of block l of the decoder or encoder, -1 for a whole (block 0) bucket.
  int64_t sync_layer(bool decoder, int64_t l) const;
  // Whether block l's gradients are reduced after each backward (ZeRO 2/3, a layer bucket).
  bool reduced_per_layer(bool decoder, int64_t l) const {
    return shard.zero_stage >= 2 && sync_layer(decoder, l) >= 0;
  }
  // The gradient sync's layer hooks around block l's forward (gather) and backward (gather,
  // zeroed gradient scratch; after: reduce).
  void before_layer_forward(bool decoder, int64_t l, engine::Stream& s);
  void before_layer_backward(bool decoder, int64_t l, engine::Stream& s);
  void after_layer_backward(bool decoder, int64_t l, engine::Stream& s);
  // Block l of the encoder or decoder through the layer block (model/blocks/layer.h). Forward,
  // from_x: its input x is already there (the stage's first layer, or full recomputation);
  // else x = h' + Drop(proj) of block l - 1, fused with RMS1. Backward: d(block output) in dres
  // on entry, d x on exit.
  void layer_forward(bool decoder, int64_t l, bool train, bool from_x, engine::Stream& s);
  bool recompute_full() const { return shard.recompute == Recompute::kFull; }
  void layer_backward(bool decoder, int64_t l, engine::Stream& s);
  blocks::LayerConfig layer_config(bool decoder) const;
  // The relative buckets and table, padding mask and (decoder) encoder output of this slot.
  blocks::LayerInputs layer_inputs(bool decoder);
  // Dropout sites enc_site(l, 0..3) / dec_site(l, 0..5).
  blocks::LayerSites layer_sites(bool decoder, int64_t l) const;
  blocks::LayerScratch layer_scratch() const;
  // Philox offset of dropout site `site` on `x`: with sequence parallelism x holds this rank's
  // rows of the site's tensor (row_offset) and is numbered as those rows on one rank.
  uint64_t row_offset(int64_t site, engine::ConstTensorView x) const {
    return site_offset(site) + tp.row_shift(x);
  }
  // In place, train only, at Philox offset `offset`.
  void dropout(engine::TensorView x, bool train, uint64_t offset, engine::Stream& s);
  int64_t local_heads() const { return cfg.n_heads / shard.tp; }
  int64_t local_inner() const { return cfg.inner() / shard.tp; }
  int64_t local_vocab() const { return cfg.padded() / shard.tp; }
  // The LM head block (model/blocks/lm_head.h) over this rank's vocabulary slice; v1.0 (tied)
  // scales its input by d^-1/2.
  blocks::LmHeadConfig lm_head_config() const;
  void dropout_grad(engine::TensorView dx, engine::ConstTensorView dy, uint64_t offset,
                    engine::Stream& s);
  // The norm block: T5's RMSNorm (no mean, no bias) over `rows` rows of width d_model.
  blocks::NormArgs norm_args(int64_t rows) const {
    return {blocks::NormKind::kRmsNorm, rows, cfg.d_model, cfg.eps};
  }
  // Rows this rank holds of the encoder's / decoder's residual stream.
  int64_t enc_rows() const { return tp.local_rows(shape.micro_batch * shape.enc_len); }
  int64_t dec_rows() const { return tp.local_rows(shape.micro_batch * shape.dec_len); }
};

}  // namespace anvil::model
