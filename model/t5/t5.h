// T5 (DESIGN.md §4): Hugging Face T5ForConditionalGeneration numerics, v1.0 and v1.1.
//   encoder:  x_0 = Drop(shared[enc_tok]);  per layer (pre-norm, RMSNorm eps 1e-6, no biases)
//             h = x + Drop(SelfAttn(RMS1(x), bias_enc));  x' = h + Drop(FFN(RMS2(h)))
//             enc = Drop(RMSf_enc(x_Le))
//   decoder:  y_0 = Drop(shared[dec_tok]);  per layer
//             h1 = y + Drop(CausalSelfAttn(RMS1(y), bias_dec))
//             h2 = h1 + Drop(CrossAttn(q = RMS2(h1), k, v = enc))
//             y' = h2 + Drop(FFN(RMS3(h2)))
//             dec = Drop(RMSf_dec(y_Ld))
//   logits = dec shared^T * d_model^-0.5 (v1.0, tied) or dec lm_head^T (v1.1, untied)
//   loss   = sum over counted tokens (labels >= 0) of CE(logits, label)  (Megatron's
//            pretrain_t5.py: sum(loss * loss_mask); the caller folds loss_mask into labels)
// Attention: softmax(q k^T + bias) v per head, without 1/sqrt(d_kv) scaling; bias_enc / bias_dec
// = the encoder's / decoder's learned relative-position table [num_buckets, H] looked up at
// t5_relative_bucket(j - i) (bidirectional in the encoder, causal buckets in the decoder), held
// by layer 0 of each stack and shared by all its layers; cross-attention has no bias and sees
// the encoder's real tokens only. FFN: wo Drop(relu(wi x)) (v1.0) or wo Drop(gelu_tanh(wi_0 x) *
// wi_1 x) (v1.1). Drop = dropout with rate `dropout` (HF dropout_rate, also on the attention
// probabilities), training only.
// Explicit forward/backward over ops/ with saved activations; gradients accumulate (+=) across
// micro-batches. Tensor parallelism (T5Shard) as Megatron's: heads, d_ff and the padded
// vocabulary split over the TP group (column-parallel qkv / cross q, kv / wi, row-parallel o /
// wo, vocab-parallel embedding, LM head and cross-entropy), with Megatron's sequence
// parallelism as an option (T5Shard sequence_parallel, parallel/tensor_parallel.h): the residual
// streams, RMSNorms and hidden dropouts on this rank's rows of B*Te and B*Td, all-gathered before
// the column-parallel qkv / cross q / wi and before the LM head (the encoder output once, for
// every cross k|v), reduce-scattered after o / co / wo; dropouts on rows are numbered as on one
// rank, so losses equal those without it. Activation recomputation (T5Shard recompute) as GPT's:
// full keeps each layer's input and reruns the layer's forward (same dropout masks) before its
// backward; selective recomputes nothing (the flash attention keeps only its softmax statistics).
// Pipeline parallelism (T5Shard pp) as Megatron's: the encoder's layers on stages [0, split), the
// decoder's on [split, pp); each stage runs its part per activation slot (the stage API below,
// driven by model/t5/t5_stage.h). Data parallelism and ZeRO 1-3 over T5Shard's DP group run in
// the model's gradient sync (parallel/grad_sync.h; reduce_gradients once per step); without that
// group the caller may sum flat_buffers().grad over DP itself. Checkpoints:
// model/t5/t5_checkpoint.h. Precision (model/run_options.h), as GptModel's: on CUDA bf16
// parameters/activations with f32 master weights, gradients and AdamW state; on the CPU f32, or f64
// for gradient checks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "model/model.h"
#include "model/param_table.h"
#include "model/run_options.h"

namespace anvil::parallel {
class Comm;
class ZeroPartition;
}  // namespace anvil::parallel

namespace anvil::model {

enum class T5Version { kV1_0, kV1_1 };

struct T5Config {
  int64_t vocab_size = 32128;
  int64_t vocab_multiple = 128;  // padded vocabulary: vocab_size rounded up to a multiple
  int64_t d_model = 512;
  int64_t d_kv = 64;  // per-head width (HF d_kv); inner = n_heads * d_kv
  int64_t n_heads = 8;
  int64_t d_ff = 2048;
  int64_t n_encoder_layers = 6;
  int64_t n_decoder_layers = 6;
  int64_t num_buckets = 32;    // HF relative_attention_num_buckets
  int64_t max_distance = 128;  // HF relative_attention_max_distance
  float dropout = 0.1f;        // HF dropout_rate
  float eps = 1e-6f;           // HF layer_norm_epsilon
  float init_factor = 1.0f;    // HF initializer_factor
  T5Version version = T5Version::kV1_0;
  bool vocab_padding_in_loss = false;  // the LM loss's softmax over the padded rows (Megatron's)

  bool tied() const { return version == T5Version::kV1_0; }
  bool gated() const { return version == T5Version::kV1_1; }
  int64_t inner() const { return n_heads * d_kv; }
  int64_t padded() const {
    return (vocab_size + vocab_multiple - 1) / vocab_multiple * vocab_multiple;
  }
  int64_t loss_vocab() const { return vocab_padding_in_loss ? padded() : vocab_size; }
  // wi's output width: d_ff, or 2 d_ff = [wi_0 | wi_1] (gated).
  int64_t wi_out() const { return gated() ? 2 * d_ff : d_ff; }
  // InvalidArgument naming the field and the expected range.
  absl::Status validate() const;
  // Parameters in GEMMs incl. the (tied) embedding, for MFU.
  int64_t matmul_params() const;
};

// HF T5Attention._relative_position_bucket for relative position n = key - query, in f32 as
// torch computes it: bidirectional halves the buckets (n > 0 in the upper half); unidirectional
// maps n > 0 to bucket 0. Distances below half the (remaining) buckets are exact, larger ones
// log-spaced up to max_distance.
int32_t t5_relative_bucket(int64_t n, bool bidirectional, int64_t num_buckets,
                           int64_t max_distance);

// The layers one pipeline stage holds: encoder [enc_begin, enc_end), decoder [dec_begin,
// dec_end) (empty ranges where it holds none).
struct T5StageLayers {
  int64_t enc_begin = 0, enc_end = 0, dec_begin = 0, dec_end = 0;
};

// Megatron's T5 pipeline layout (--pipeline-model-parallel-split-rank): the encoder layers split
// evenly over stages [0, split), the decoder layers over [split, pp); pp = 1: every layer.
// InvalidArgument naming the numbers unless 0 <= stage < pp, 1 <= split < pp (pp > 1) and split
// divides the encoder layers, pp - split the decoder layers.
absl::StatusOr<T5StageLayers> t5_stage_layers(const T5Config& cfg, int pp, int split, int stage);

// The part of the model one rank holds. tp > 1 splits the heads (n_heads % tp == 0), d_ff and
// the padded vocabulary (each % tp == 0) over the TP group tp_comm (not owned); the relative
// tables and the norms are replicated (their gradients summed over TP where partial). Parameter
// names, initial values and dropout masks are the single-rank model's at the same global
// elements, except the FFN-hidden dropout, whose masks under TP are numbered by the local
// [rows, d_ff / tp] slice (valid dropout, other masks than one rank's).
struct T5Shard {
  int tp = 1, tp_rank = 0;
  parallel::Comm* tp_comm = nullptr;
  // Pipeline: pp stages, this one pp_rank; stages [0, pp_split) hold the encoder. Each stage
  // holds its layers, the shared embedding where it embeds (stage 0: encoder input, stage
  // pp_split: decoder input) or ends the model with a tied head, and the relative table of each
  // stack it has layers of (those copies are summed over the pipeline: sum_shared_grads).
  int pp = 1, pp_rank = 0, pp_split = 0;
  int64_t act_slots = 1;  // activation sets: micro-batches in flight at once
  // Gradient sync over the DP group dp_comm (not owned; parallel/grad_sync.h), as GptShard's:
  // without it the gradients stay local; zero_stage 0: reduce_gradients all-reduces them in
  // buckets of dp_bucket_elems (0: one). ZeRO (dp_comm required): this stage's buckets
  // (embeddings, relative tables, each encoder and decoder block, final) split evenly over
  // zero_dp ranks. 1: the f32 master weights and AdamW moments hold this rank's pieces only;
  // 2: also the gradients (each block's reduce-scattered right after its backward); 3: also the
  // parameters (each block gathered before its forward and backward, the next one prefetched).
  // Block 0 of each stack holds the relative table all its blocks use: it stays whole at 2, 3,
  // as the embeddings and final norms do.
  int zero_stage = 0;
  int zero_dp = 1, zero_rank = 0;
  parallel::Comm* dp_comm = nullptr;
  int64_t dp_bucket_elems = 0;
  // Sequence parallelism (tp > 1): B*Te and B*Td divisible by tp into row blocks of a multiple
  // of 4 elements (check_t5_run). Pipeline transfers then carry this rank's rows only.
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  // Optimizer offload (ZeRO-Offload, parallel/offload_optimizer.h; zero_stage 0-2), as
  // GptShard's: the f32 master weights and AdamW moments this rank updates live in host memory
  // (pinned on CUDA) and AdamW runs there with offload_threads threads (0: all).
  bool offload_optimizer = false;
  int offload_threads = 0;
  // InvalidArgument naming the numbers (heads, d_ff, padded vocabulary % tp, the stage layout;
  // zero_stage in [0, 3], zero_rank in [0, zero_dp)); create() also needs tp_comm when tp > 1,
  // dp_comm with ZeRO.
  absl::Status validate(const T5Config& cfg) const;
  T5StageLayers layers(const T5Config& cfg) const;  // of a valid shard
};

struct T5RunShape {
  int64_t micro_batch;  // B
  int64_t enc_len;      // Te (encoder sequence length)
  int64_t dec_len;      // Td (decoder sequence length)
};

// Sequence parallelism's row split over tp ranks: InvalidArgument naming the numbers unless
// B*Te and B*Td each split into tp row blocks of a multiple of 4 elements (the Philox counters
// of a block's dropout start at a whole counter).
absl::Status check_t5_row_split(const T5Config& cfg, const T5RunShape& shape, int tp);

// One micro-batch's host inputs. enc_lengths may be null (every encoder token is real);
// otherwise encoder tokens t >= enc_lengths[b] are padding (io/t5_dataset's enc_padding_mask is
// a prefix of ones). labels < 0 are not counted (fold the loss mask in).
struct T5Batch {
  const int32_t* enc_tokens = nullptr;   // [B*Te]
  const int32_t* dec_tokens = nullptr;   // [B*Td]
  const int32_t* labels = nullptr;       // [B*Td]
  const int32_t* enc_lengths = nullptr;  // [B] or null
};

class T5Model {
 public:
  // Bytes per category ("params", "master", "grads", "optimizer", "activations", "workspace").
  static absl::StatusOr<engine::MemoryPlan> plan(const T5Config& cfg, const T5RunShape& shape,
                                                 const Precision& prec, const T5Shard& shard = {});
  // Host bytes of the optimizer offload (0 without shard.offload_optimizer): master, m, v and
  // the staging of gradients and compute copy (parallel::OffloadOptimizer::host_bytes).
  static absl::StatusOr<size_t> offload_host_bytes(const T5Config& cfg, const T5RunShape& shape,
                                                   const Precision& prec, const T5Shard& shard);
  // Allocates the arenas and initializes the parameters as HF T5PreTrainedModel._init_weights
  // (factor f): shared, lm_head N(0, f); q N(0, f (d d_kv)^-1/2); k, v, wi N(0, f d^-1/2);
  // o N(0, f (H d_kv)^-1/2); wo N(0, f d_ff^-1/2); relative tables N(0, f d^-1/2); norms 1.
  // Deterministic for `seed` (Philox, ops/init_normal.h), the same on CPU and GPU.
  static absl::StatusOr<std::unique_ptr<T5Model>> create(const T5Config& cfg,
                                                         const T5RunShape& shape,
                                                         const Precision& prec, uint64_t seed,
                                                         const T5Shard& shard = {});
  ~T5Model();

  const T5Config& config() const;
  const T5RunShape& shape() const;
  const T5Shard& shard() const;
  // HF names (shared.weight, encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight,
  // ...) except for three fused matrices: SelfAttention.qkv.weight = cat(q, k, v) [3 inner, d],
  // EncDecAttention.kv.weight = cat(k, v) [2 inner, d], and (v1.1) DenseReluDense.wi.weight =
  // cat(wi_0, wi_1) [2 d_ff, d] (rows stacked in that order). shared.weight has padded rows.
  // Under TP the local shards (tp_split_dim, tp_parts; model/param_table.h tp_global_index).
  ParamTable& params();
  // Under ZeRO master, m and v are this rank's shard [flat_numel / zero_dp] (master: whole
  // when it is the compute copy), from stage 2 grad is absent, at stage 3 value is a shard.
  FlatBuffers flat_buffers();
  // The ZeRO partition of the flat buffers (null without ZeRO).
  const parallel::ZeroPartition* zero_partition() const;

  // The single-stage API: slot 0 of a model with one pipeline stage.
  // Forward over one micro-batch; the loss sum is read by loss_sum(). train false: no dropout,
  // nothing kept for backward. dropout_offset numbers this forward (Philox), as GptModel.
  // Aborts (CHECK) on tokens outside the vocabulary or lengths outside [1, Te].
  void forward(const T5Batch& batch, bool train, uint64_t dropout_offset, engine::Stream& stream);
  // Backward of the last training forward; gradients accumulate (+=). grad_scale = d(total
  // loss) / d(loss of one token).
  void backward(float grad_scale, engine::Stream& stream);
  double loss_sum(engine::Stream& stream);  // syncs
  // [B*Td, padded] act logits of the last forward with train = false.
  engine::ConstTensorView last_logits() const;

  // Pipeline stage API (the above is this for slot 0 of a one-stage model). set_batch copies
  // a micro-batch's host inputs into `slot` (every stage takes the whole batch: the encoder
  // lengths mask attention on every stage). forward_stage runs this stage's layers on the slot:
  // its input is the embedding (the stage that starts a stack) or what arrived in
  // stage_inputs(slot); backward_stage takes d(output) from the loss (the last stage) or from
  // stage_output_grads(slot). The transfers (act dtype):
  //   encoder stage -> next encoder stage:  hidden [B*Te, d]
  //   last encoder stage -> first decoder stage:  encoder output [B*Te, d] (after the final
  //                                               encoder norm and dropout)
  //   decoder stage -> next decoder stage:  hidden [B*Td, d], encoder output [B*Te, d]
  // (with sequence parallelism each of them is this TP rank's rows: [B*T / tp, d]),
  // and their gradients backwards (a decoder stage's encoder-output gradient sums those of all
  // later decoder stages' cross-attention).
  void set_batch(int64_t slot, const T5Batch& batch, engine::Stream& stream);
  void forward_stage(int64_t slot, bool train, uint64_t dropout_offset, engine::Stream& stream);
  void backward_stage(int64_t slot, float grad_scale, engine::Stream& stream);
  double loss_sum(int64_t slot, engine::Stream& stream);  // the last stage; syncs
  // The device view loss_sum(slot) reads (model/pipeline_stage.h); empty before the last stage.
  LossViews loss_views(int64_t slot) const;
  std::vector<engine::TensorView> stage_inputs(int64_t slot);
  std::vector<engine::TensorView> stage_outputs();  // of the last forward_stage
  std::vector<engine::TensorView> stage_output_grads(int64_t slot);
  std::vector<engine::TensorView> stage_input_grads();  // of the last backward_stage
  bool ends_model() const;  // holds the last decoder layer, the head and the loss
  // After a step's last backward, over the pipeline group pp (null: no-op): each parameter held
  // by several stages (the shared embedding, the relative tables) gets the sum of its copies'
  // gradients (Megatron's embedding group); stages without a copy contribute zeros.
  void sum_shared_grads(parallel::Comm* pp, engine::Stream& stream);
  // Sum of squared gradients of this stage's parameters, over its TP group (a collective),
  // counting each model parameter once: TP-replicated ones on TP rank 0, the copies of shared
  // parameters on the first stage holding one; under ZeRO the own pieces only (sum over DP).
  // Sum it over the pipeline for the norm. Syncs.
  double grad_sum_squares(engine::Stream& stream);
  // The same sum left on the device ([1] grad dtype, after the TP sum; no sync).
  engine::ConstTensorView grad_sum_squares_device(engine::Stream& stream);
  // Whether this stage's p is the model's first copy: false where an earlier pipeline stage
  // also holds p (the shared embedding, a relative table), whose copy then stands for all in
  // the gradient norm and in checkpoints.
  bool first_copy(const Param& p) const;

  void zero_grads(engine::Stream& stream);
  // After the last backward of a step and sum_shared_grads, with dp_comm: plain DP sums the
  // gradients over DP, ZeRO reduce-scatters those still whole onto their owners (stage 1: all;
  // 2, 3: the embeddings, block 0 and the final norms). No-op without dp_comm.
  void reduce_gradients(engine::Stream& stream);
  // Plain DP: while on, each block's all-reduce starts right after its backward (set it for a
  // step's last micro-batch only).
  void set_overlap_grad_sync(bool on);
  // After the caller overwrote this rank's parameter values in flat_buffers() (a checkpoint
  // load): ZeRO-3 gathers again the buckets that stay whole; otherwise nothing.
  void params_loaded(engine::Stream& stream);
  // out [params().flat_numel()] (=, act dtype, on the model's device): this stage's parameter
  // values whole (ZeRO-3 gathers them over DP: a collective).
  void gather_values(engine::TensorView out, engine::Stream& stream);
  // After a step's last backward, before the gradients are read (DP sum, norm, update): with
  // sequence parallelism sums the RMSNorm weight gradients (each rank's rows) over TP; else a
  // no-op.
  void finish_backward(engine::Stream& stream);
  // L2 norm of this stage's gradient (syncs; a TP collective: replicated parameters counted
  // once); with one stage the global norm: sqrt(grad_sum_squares).
  double grad_norm(engine::Stream& stream);
  void optimizer_step(const OptimizerStep& s, engine::Stream& stream);
  // Bytes held by the model's arenas, in total and for one plan category.
  size_t arena_bytes() const;
  size_t arena_bytes(const std::string& category) const;
  uint64_t dropout_offset_span() const;

  struct Impl;

 private:
  T5Model();
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil::model
