// GPT-2 (DESIGN.md §4): learned token + position embeddings, L pre-LN blocks
//   h = x + Drop(Attn(LN1(x)));  x' = h + Drop(MLP(LN2(h))),  MLP = W2 gelu_tanh(W1 . + b1) + b2
// final LN, LM head tied to the token embedding (logits = LNf(x) wte^T over the padded vocab),
// mean cross-entropy over counted tokens. GptConfig's architecture options turn it into the
// BigScience variants and LLaMA (docs/models.md): ALiBi, rotary or no position embedding, a
// LayerNorm after the word embedding (BLOOM), gated MLPs (SwiGLU ...), RMSNorm, no linear
// biases, an untied LM head (lm_head.weight). Its encoder features make it BERT (set by
// model/bert/bert_family.cc; docs/models.md, model/stack/mlm_head.cc): bidirectional attention
// with a key-padding mask (causal false), token-type embeddings (type_vocab_size), post-LN blocks
// (norm_placement kPost: x = LN1(x + attn(x)), x = LN2(x + mlp(x)), no ln_f), the MLM head (head
// kMlm: dense, GELU-erf, LayerNorm, tied decoder + output bias) and the binary head (binary_head:
// pooler dense + tanh on [CLS], then a 2-way linear) for NSP / sentence order. Explicit
// forward/backward over ops/ with saved activations; gradients accumulate (+=) across micro-batches
// into f32 buffers. Precision: on CUDA, bf16 parameters/activations with f32 master weights,
// gradients and AdamW state; on the CPU everything f32 (or f64 for gradient checks: act_dtype =
// kF64).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "model/model.h"
#include "model/param_table.h"
#include "model/stack/gpt_config.h"
#include "ops/adamw.h"

namespace anvil::parallel {
class Comm;
class ZeroPartition;
}  // namespace anvil::parallel

namespace anvil::model {

// One micro-batch's host inputs, [B*T] i32 each. targets < 0 are not counted; segments (may be
// null: plain causal attention) number the documents of each sample for a document-aware
// causal mask (Megatron's reset_attention_mask; see ops/attention.h); prefix_end (may be null)
// widens the causal mask per query: keys before prefix_end[i] are visible too (prefix-LM, see
// ops/flash_attention.h); loss_weights (may be null: 1) are per-token loss weights [B*T] f32 that
// multiply each token's loss and its gradient (reweight_loss_based_on_position_frequency).
// The encoder features (BERT) also take token_types [B*T] (< type_vocab_size; with token
// types), lengths [B] (bidirectional: the real tokens of each sample, keys at or past it are
// padding) and, with the binary head, binary_labels [B] (0/1; < 0: not counted).
struct GptBatch {
  const int32_t* tokens = nullptr;
  const int32_t* positions = nullptr;
  const int32_t* targets = nullptr;
  const int32_t* segments = nullptr;
  const int32_t* token_types = nullptr;
  const int32_t* lengths = nullptr;
  const int32_t* binary_labels = nullptr;
  const int32_t* prefix_end = nullptr;
  const float* loss_weights = nullptr;
};

class GptModel {
 public:
  // Bytes per category ("params", "master", "grads", "optimizer", "activations", "workspace")
  // this configuration needs, computed without allocating; create() allocates exactly this.
  // "master" is absent when act == grad dtype (the compute copy is the master). "workspace"
  // includes, on CUDA, the 32 MiB cuBLASLt workspace that forward/backward attach to the
  // caller's stream for their duration (the stream's own workspace is restored afterwards).
  static absl::StatusOr<engine::MemoryPlan> plan(const GptConfig& cfg, const GptRunShape& shape,
                                                 const Precision& prec, const GptShard& shard = {});
  // Allocates one arena per category and initializes parameters as GPT-2 does: N(0, init_std),
  // residual output projections N(0, init_std / sqrt(2 L)), biases 0, LN gamma 1 beta 0
  // (deterministic for `seed`, identical on CPU and GPU).
  // Host bytes the optimizer offload of this shard holds (0 without shard.offload_optimizer):
  // f32 master, m, v and gradient staging of the state this rank updates, and the compute-copy
  // staging (parallel/offload_optimizer.h); pinned on CUDA, not part of plan().
  static absl::StatusOr<size_t> offload_host_bytes(const GptConfig& cfg, const GptRunShape& shape,
                                                   const Precision& prec,
                                                   const GptShard& shard = {});
  static absl::StatusOr<std::unique_ptr<GptModel>> create(const GptConfig& cfg,
                                                          const GptRunShape& shape,
                                                          const Precision& prec, uint64_t seed,
                                                          const GptShard& shard = {});
  ~GptModel();

  const GptConfig& config() const;
  const GptShard& shard() const;
  ParamTable& params();
  // The ZeRO partition of the flat buffers (null without ZeRO; parallel/zero.h).
  const parallel::ZeroPartition* zero_partition() const;
  // The flat buffers behind params() (model/model.h).
  using FlatBuffers = model::FlatBuffers;
  FlatBuffers flat_buffers();

  // Forward over one micro-batch. tokens, targets, positions: [B*T] i32 host arrays (targets < 0
  // are not counted). Returns nothing; the loss sum is read by loss_sum(). With `train` false
  // no activations for backward are kept and dropout is off.
  // dropout_offset numbers this forward (e.g. training micro-batches so far): dropout site s
  // uses Philox offset dropout_offset * dropout_offset_span() + s * stride, so distinct values
  // never share random numbers; the same value replays the same masks.
  // grad_scale = d(total loss)/d(loss of one token), e.g. 1 / tokens counted in the whole step.
  void forward(const int32_t* tokens, const int32_t* positions, const int32_t* targets, bool train,
               uint64_t dropout_offset, engine::Stream& stream);
  // The same from a whole GptBatch (BERT's token types, lengths and binary labels).
  void forward(const GptBatch& batch, bool train, uint64_t dropout_offset, engine::Stream& stream);
  // Backward of the last forward; parameter gradients accumulate (+=) into grads().
  void backward(float grad_scale, engine::Stream& stream);
  // Sum of per-token losses of the last forward (syncs the stream). BERT: the masked tokens'
  // losses + (counted / B) * the binary losses (model/stack/mlm_head.cc).
  double loss_sum(engine::Stream& stream);
  // The LM-head logits of the last forward (slot 0) with train = false, [B*T, padded / tp] act
  // dtype on the model's device, for greedy predictions (a training forward leaves dlogits
  // there). Only where shard().post.
  engine::ConstTensorView last_logits() const;

  // Heads on the final hidden state instead of the LM head (model/blocks/cls_head.h; post only):
  // with `on`, a final-chunk forward stops after ln_f (no logits; loss_sum 0) and its backward
  // takes d(ln_f output) from final_hidden_grad(), which the caller writes (=, all B*T rows, the
  // same on every TP rank) after that forward and right before the backward.
  void set_hidden_head(bool on);
  // ln_f output of the slot's last forward: [B*T, d] act dtype on the model's device (post only).
  engine::ConstTensorView final_hidden(int64_t slot = 0) const;
  // d(ln_f output) for a hidden-head backward: [B*T, d] act dtype on the model's device.
  engine::TensorView final_hidden_grad();

  // Data-parallel overlap (plain DP: shard.dp_comm without ZeRO): while on, each layer's
  // gradient all-reduce starts right after that layer's backward has queued its last gradient
  // update (parallel/grad_sync.h). The trainer sets it for each step's last micro-batch only.
  void set_overlap_grad_sync(bool on);

  // Pipeline stage API (forward/backward above are these for slot 0 over every chunk).
  // set_batch copies a micro-batch's inputs into (chunk, slot). forward_chunk runs
  // chunk `chunk` on that slot: its input is the embedding (chunk 0 with shard.pre) or what
  // the caller placed in chunk_input(chunk, slot); without post on the last chunk its output is
  // chunk_output() until the next forward_chunk. backward_chunk takes d(output) from the loss
  // (post, last chunk) or from chunk_output_grad(chunk, slot); afterwards chunk_input_grad()
  // holds d(input) (unless chunk 0 with pre) until the next backward_chunk.
  void set_batch(int64_t chunk, int64_t slot, const GptBatch& batch, engine::Stream& stream);
  void forward_chunk(int64_t chunk, int64_t slot, bool train, uint64_t dropout_offset,
                     engine::Stream& stream);
  void backward_chunk(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& stream);
  engine::TensorView chunk_input(int64_t chunk, int64_t slot);        // [B*T, d] act
  engine::TensorView chunk_output();                                  // [B*T, d] act
  engine::TensorView chunk_output_grad(int64_t chunk, int64_t slot);  // [B*T, d] act
  engine::TensorView chunk_input_grad();                              // [B*T, d] act
  // Loss sum of the slot's last forward (post only; 0 elsewhere). Syncs.
  double loss_sum(int64_t slot, engine::Stream& stream);
  // The device views loss_sum(slot) reads (model/pipeline_stage.h), valid until the slot's next
  // forward; empty views on a stage that does not end the model.
  LossViews loss_views(int64_t slot) const;
  // BERT: the sum over the samples of the binary head's cross-entropy in the slot's last
  // forward (Megatron's sop loss times B), a part of loss_sum (mlm_head.cc). 0 without a
  // binary head and where not post. Syncs.
  double binary_loss_sum(int64_t slot, engine::Stream& stream);

  void zero_grads(engine::Stream& stream);
  // After the caller overwrote this rank's parameter values in flat_buffers() (a checkpoint
  // load): ZeRO-3 gathers again the buckets that stay gathered; otherwise nothing.
  void params_loaded(engine::Stream& stream);
  // out [params().flat_numel()] (=, act dtype, on the model's device): every parameter value
  // this rank holds a part of, whole (ZeRO-3 gathers its buckets over DP: collective).
  void gather_values(engine::TensorView out, engine::Stream& stream);
  // After a step's last backward: with sequence parallelism, sums the layernorm gradients (each
  // TP rank saw its rows only) over TP; otherwise nothing.
  void finish_backward(engine::Stream& stream);
  // After the last backward of a step (and the embedding group's sum), with dp_comm: plain DP
  // sums the gradients not reduced early over DP; ZeRO reduce-scatters those still whole on
  // this rank onto their owners (stage 1: all; 2, 3: the embedding and final-LN buckets).
  // No-op without dp_comm.
  void reduce_gradients(engine::Stream& stream);
  // sqrt(sum of squared gradients) (syncs) of this rank's parameters. With tp > 1 or pp it
  // is the local part only: use grad_sum_squares and reduce over the model-parallel ranks.
  double grad_norm(engine::Stream& stream);
  // Sum of squared gradients this rank holds, counting each model parameter once over the
  // model-parallel ranks: parameters replicated over TP count on TP rank 0 only, the LM head's
  // copy of the tied embedding (post without pre) not at all; under ZeRO only the own pieces
  // (sum over DP next). Syncs.
  double grad_sum_squares(engine::Stream& stream);
  // The same sum left on the device: [1] grad dtype, valid once the stream reaches it (no sync).
  engine::ConstTensorView grad_sum_squares_device(engine::Stream& stream);
  // One AdamW step on all parameters this rank updates (no decay on biases and LayerNorms; see
  // ParamTable), under ZeRO on the own pieces, then the parameters gathered back (stages 1, 2:
  // every bucket; 3: the buckets that stay gathered).
  using OptimizerStep = model::OptimizerStep;
  void optimizer_step(const OptimizerStep& s, engine::Stream& stream);

  // Bytes actually held by the model's arenas, in total and for one plan category.
  size_t arena_bytes() const;
  size_t arena_bytes(const std::string& category) const;
  // Philox counters one forward may consume (see forward's dropout_offset).
  uint64_t dropout_offset_span() const;

 private:
  GptModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil::model
