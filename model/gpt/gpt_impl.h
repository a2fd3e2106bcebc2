// GptModel's private state, shared by gpt.cc (creation, optimizer) and gpt_pass.cc
// (forward/backward). Not part of the public API.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/stream.h"
#include "model/gpt/gpt.h"
#include "model/gpt/gpt_layout.h"
#include "ops/attention.h"
#include "ops/embedding.h"
#include "ops/rotary.h"
#include "parallel/grad_sync.h"
#include "parallel/tensor_parallel.h"

namespace anvil::model {

struct GptModel::Impl {
  GptConfig cfg;
  GptRunShape shape;
  GptPrecision prec;
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
  // train, dlogits (grad_scale 1) replace the logits.
  void lm_loss(const gpt_detail::SlotData& sd, gpt_detail::HeadActs& hd, bool train,
               engine::Stream& s);
  // BERT's token-type embedding lookup (tte [type_vocab_size, d]).
  ops::EmbeddingArgs token_type_args() const;
  void layer_backward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                      engine::TensorView dres, engine::Stream& s);
  // The sub-blocks both norm placements share (gpt_pass.cc). Forward: the attention output
  // Drop(atty Wo^T + bo) from `in` [B*T, d] (= ln1 pre-LN, x post-LN), and the MLP output
  // Drop(gelu Wp^T + bp) from a.ln2 (blocks::mlp_forward, then the TP sum and the dropout
  // here), each as the rows this rank holds (in buf.proj). Backward:
  // from d(output) in dres, parameter gradients (+=) and d(input) [rows, d] (in buf.dln, summed
  // over TP).
  void hidden_drop(const gpt_detail::SlotData& sd, engine::TensorView x, int64_t site, bool train,
                   engine::Stream& s);
  engine::TensorView attention_block_forward(const gpt_detail::SlotData& sd,
                                             gpt_detail::LayerActs& a,
                                             const gpt_detail::LayerWeights& lw, int64_t l,
                                             engine::ConstTensorView in, bool train,
                                             engine::Stream& s);
  engine::TensorView mlp_block_forward(const gpt_detail::SlotData& sd, gpt_detail::LayerActs& a,
                                       const gpt_detail::LayerWeights& lw, int64_t l, bool train,
                                       engine::Stream& s);
  // d(projection output) from dres through the dropout mask (or dres itself), as all B*T rows.
  engine::TensorView drop_grad(const gpt_detail::SlotData& sd, int64_t site,
                               engine::TensorView dres, engine::Stream& s);
  engine::TensorView mlp_block_backward(const gpt_detail::SlotData& sd,
                                        const gpt_detail::LayerActs& a,
                                        const gpt_detail::LayerWeights& lw,
                                        const gpt_detail::LayerWeights& lg, int64_t l,
                                        engine::TensorView dres, engine::Stream& s);
  engine::TensorView attention_block_backward(const gpt_detail::SlotData& sd,
                                              const gpt_detail::LayerActs& a,
                                              const gpt_detail::LayerWeights& lw,
                                              const gpt_detail::LayerWeights& lg, int64_t l,
                                              engine::ConstTensorView in, engine::TensorView dres,
                                              engine::Stream& s);
  // After a layer's backward: its layernorm gradients summed over TP (sequence parallelism,
  // ZeRO 2/3), then the gradient sync's after-layer hook.
  void layer_grads_done(int64_t local, const gpt_detail::LayerWeights& lg, engine::Stream& s);
  // Post-LN layers (gpt_post_ln.cc): forward writes LN2's output into `out` [rows, d] (the next
  // layer's x, x_final or the chunk output); backward takes d(out) in dres and leaves d x there.
  void post_layer_forward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                          engine::TensorView out, bool train, engine::Stream& s);
  void post_layer_backward(const gpt_detail::SlotData& sd, int64_t slot, int64_t local,
                           engine::TensorView dres, engine::Stream& s);
  // BERT's heads (bert_head.cc) on the head input hd.lnf: forward to the MLM and binary losses,
  // backward to d(head input) [B*T, d] in buf.dln (the same on every TP rank).
  void bert_head_forward(const gpt_detail::SlotData& sd, int64_t slot, bool train,
                         engine::Stream& s);
  void bert_head_backward(const gpt_detail::SlotData& sd, int64_t slot, float grad_scale,
                          engine::Stream& s);
  ops::AttentionArgs attention_args(int64_t layer, float dropout_p, uint64_t dropout_offset) const;
  // Rotary embedding of this rank's heads of q or k (position_embedding rotary).
  ops::RotaryArgs rotary_args() const;
  // The attention core of layer l: atty (=) from qkv, and its backward dqkv (=) from datty,
  // through flash attention where it runs (gpt_detail::uses_flash_attention), else the unfused
  // op. Both number the dropout elements the same way.
  void attention_core_forward(const gpt_detail::SlotData& sd, gpt_detail::LayerActs& a,
                              int64_t layer, bool train, engine::Stream& s);
  void attention_core_backward(const gpt_detail::SlotData& sd, const gpt_detail::LayerActs& a,
                               int64_t layer, engine::TensorView dqkv, engine::TensorView datty,
                               engine::Stream& s);
  // Rows of the [B*T, d] residual stream this rank holds (B*T / tp with sequence parallelism).
  int64_t rows() const { return tp.local_rows(shape.micro_batch * shape.seq_len); }
  // sp(): sums the layernorm gradients of a layer (or ln_f) over TP.
  void sync_layernorm_grads(const gpt_detail::LayerWeights& g, engine::Stream& s);
};

// Writes the binary head's constant row indices (Buffers::cls_rows = b*T, batch_rows = b);
// nothing where they are absent (not BERT, not the last stage, no binary head).
void bert_head_setup(const GptConfig& cfg, const GptRunShape& shape, gpt_detail::Buffers& b,
                     engine::Stream& s);

}  // namespace anvil::model
