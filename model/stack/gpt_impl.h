// GptModel's private state, shared by gpt.cc (creation, optimizer) and gpt_pass.cc
// (forward/backward). Not part of the public API.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/stream.h"
#include "model/blocks/attention.h"
#include "model/blocks/embedding.h"
#include "model/blocks/layer.h"
#include "model/blocks/lm_head.h"
#include "model/stack/gpt.h"
#include "model/stack/gpt_layout.h"
#include "ops/attention.h"
#include "ops/embedding.h"
#include "ops/rotary.h"
#include "parallel/grad_sync.h"
#include "parallel/offload_optimizer.h"
#include "parallel/tensor_parallel.h"

namespace anvil::model {

struct GptModel::Impl {
  GptConfig cfg;
  GptRunShape shape;
  Precision prec;
  GptShard shard;
  uint64_t seed = 0;                                          // parameter init and dropout key
  std::vector<std::pair<std::string, engine::Arena>> arenas;  // by plan category
  gpt_detail::Buffers buf;
  // The TP group's mappings (sequence parallelism included); gathers into buf.gathered.
  parallel::TensorParallel tp;

  // Dropout sites per forward: the embedding, then per layer attention probabilities,
  // attention output, MLP output. Each owns `site_stride` Philox counters.
  uint64_t site_stride = 0;
  int64_t n_sites() const { return 1 + 3 * cfg.n_layers; }
  // Backward of (chunk, slot) needs its training forward first.
  std::vector<bool> ready_for_backward;  // [chunks * slots]
  engine::TensorView last_input_grad;    // d(input) of the last backward_chunk
  // Gradient sync over DP (parallel/grad_sync.h): plain DP or ZeRO 1-3 over the layout's
  // buckets; it binds buf.w.layers / buf.g.layers of a layer to gathered values or scratch.
  // Optimizer offload: the host master / m / v that buf.flat's views point at (null: none).
  std::unique_ptr<parallel::OffloadOptimizer> offload;
  std::unique_ptr<parallel::GradSync> sync;
  bool hidden_head = false;  // GptModel::set_hidden_head

  uint64_t site_offset(uint64_t dropout_offset, int64_t site) const {
    return dropout_offset * site_stride * static_cast<uint64_t>(n_sites()) +
           static_cast<uint64_t>(site) * site_stride;
  }
  int64_t n_chunks() const { return static_cast<int64_t>(buf.chunk_layers.size()); }
  bool is_final_chunk(int64_t chunk) const { return shard.post && chunk == n_chunks() - 1; }
  void set_batch(int64_t chunk, int64_t slot, const GptBatch& batch, engine::Stream& stream);
  void forward_chunk(int64_t chunk, int64_t slot, bool train, uint64_t dropout_offset,
                     engine::Stream& stream);
  void backward_chunk(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& stream);
  // Creates `sync` over buf's buckets (one chain per chunk).
  absl::Status setup_grad_sync(engine::Device device);

  void embed(int64_t slot, bool train, engine::Stream& s);
  void layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local, bool fused_input,
                     bool train, engine::Stream& s);
  void head_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t last_local, bool train,
                    engine::Stream& s);
  void head_backward(int64_t slot, float grad_scale, engine::Stream& s);
  // The (vocab-parallel) cross-entropy of hd.logits against sd.targets into hd.losses; with
  // train, dlogits (grad_scale 1) replace the logits. The LM head block (model/blocks/lm_head.h)
  // over this rank's vocabulary slice.
  void lm_loss(const gpt_detail::SlotData& sd, gpt_detail::HeadActs& hd, bool train,
               engine::Stream& s);
  blocks::LmHeadConfig lm_head_config() const;
  // The embedding block (model/blocks/embedding.h): wte, wpe (learned positions) and BERT's
  // tte over this rank's vocabulary slice.
  blocks::EmbeddingConfig embedding_config() const;
  void layer_backward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                      engine::TensorView dres, engine::Stream& s);
  // After a layer's backward: its layernorm gradients summed over TP (sequence parallelism,
  // ZeRO 2/3), then the gradient sync's after-layer hook.
  void layer_grads_done(int64_t local, const gpt_detail::LayerWeights& lg, engine::Stream& s);
  // Post-LN layers (gpt_post_ln.cc): forward writes LN2's output into `out` [rows, d] (the next
  // layer's x, x_final or the chunk output). layer_backward serves both placements: d(layer
  // output) in dres on entry, d x on exit.
  void post_layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                          engine::TensorView out, bool train, engine::Stream& s);
  // Either placement through the layer block (model/blocks/layer.h): prev (pre-LN) the last
  // residual of the previous layer when x is fused from it, out (post-LN) the output.
  void layer_block_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                           engine::ConstTensorView prev, engine::TensorView out, bool train,
                           engine::Stream& s);
  blocks::LayerConfig layer_config() const;
  blocks::LayerSites layer_sites(const gpt_detail::SlotData& sd, int64_t layer) const;
  // proj, dln, dbig, dglu and the ops' workspace.
  blocks::LayerScratch layer_scratch() const;
  // The MLM and binary heads (head kMlm, mlm_head.cc) on the head input hd.lnf: forward to the MLM
  // and binary losses, backward to d(head input) [B*T, d] in buf.dln (the same on every TP rank).
  void mlm_head_forward(const gpt_detail::SlotData& sd, int64_t slot, bool train,
                        engine::Stream& s);
  void mlm_head_backward(const gpt_detail::SlotData& sd, int64_t slot, float grad_scale,
                         engine::Stream& s);
  // The attention block (model/blocks/attention.h) of every layer: this rank's heads, flash
  // attention where it runs (gpt_detail::uses_flash_attention), else the unfused op (its
  // probabilities recomputed under selective recomputation); the probability dropout of layer
  // `layer` at its site 1 + 3 layer.
  blocks::AttentionConfig attention_config() const;
  // Rows of the [B*T, d] residual stream this rank holds (B*T / tp with sequence parallelism).
  int64_t rows() const { return tp.local_rows(shape.micro_batch * shape.seq_len); }
  // sp(): sums the layernorm gradients of a layer (or ln_f) over TP.
  void sync_layernorm_grads(const gpt_detail::LayerWeights& g, engine::Stream& s);
};

// Writes the binary head's constant row indices (Buffers::cls_rows = b*T, batch_rows = b);
// nothing where they are absent (not the last stage, no binary head).
void mlm_head_setup(const GptConfig& cfg, const GptRunShape& shape, gpt_detail::Buffers& b,
                    engine::Stream& s);

}  // namespace anvil::model
