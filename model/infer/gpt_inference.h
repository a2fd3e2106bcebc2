// GPT-2 inference with a KV cache, on one rank or tensor-parallel over a TP group (Megatron's
// split, as GptShard describes: each rank holds its heads, MLP units and vocabulary rows; the
// row-parallel outputs and the embedding are summed over TP and the logits all-gathered, so
// every rank gets the whole logits and the same tokens). No pipeline parallelism.
// The same math as GptModel's evaluation forward (gpt.h), with the keys and values of every
// processed position kept so each new token costs one row per layer:
//   prefill(prompts): the prompts of some cache slots, right-padded to their longest length T,
//     run as one [n*T, d] batch with causal attention (the padding lies after every real
//     position, so real queries never see it); each prompt's keys/values go to its slot's cache
//     rows [0, len); the logits of each prompt's last position come back (and, to score a
//     prompt, those of its earlier positions: the LM head reads out max_batch rows at a time).
//   decode(tokens): one token per given slot at position len(slot); every slot's row runs (the
//     others are masked: no cache write, kv_length 0); attention of the new query over the
//     cached keys [0, len] (flash attention with causal = false and kv_lengths = len + 1).
// Logits: [n, vocab_size] f32 over the real vocabulary (the padded rows of wte are left out).
// Memory (one arena per category, sized by plan(), nothing allocated afterwards):
//   params       the flat parameter buffer (act dtype), ParamTable layout of GptModel
//   kv_cache     [layers, max_batch, max_len, 2, kv_heads / tp, head_dim] act (k | v per
//                position; grouped-query attention: k_g | v_g per kv head g, which the G =
//                heads / kv_heads query heads g*G .. g*G+G-1 read, one flash call per group)
//   activations  one layer's buffers for max_batch * max_len rows (prefill's worst case)
//   workspace    the cuBLASLt workspace (CUDA)
// Precision: f32 on the CPU; bf16 on CUDA with f32 GEMM accumulation and f32 logits (the flash
// attention kernels need head_dim 64 or 128 there).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "model/param_table.h"
#include "model/stack/gpt.h"
#include "model/train/checkpoint.h"

namespace anvil::model {

struct InferenceShape {
  int64_t max_batch = 1;  // KV cache slots: sequences in flight at once
  int64_t max_len = 0;    // positions per slot, prompt + generated (0: cfg.max_seq_len)
};

class GptInference {
 public:
  // Bytes per category ("params", "kv_cache", "activations", "workspace") without allocating.
  // InvalidArgument naming the numbers for a bad config or shape (max_len > max_seq_len ...)
  // and for what the CUDA path cannot run (head_dim other than 64 / 128, act other than bf16).
  // shard: only tp, tp_rank and tp_comm (required when tp > 1) may differ from the default.
  static absl::StatusOr<engine::MemoryPlan> plan(const GptConfig& cfg, const InferenceShape& shape,
                                                 const Precision& prec, const GptShard& shard = {});
  // Allocates exactly plan()'s arenas; parameters are zero until load(). With tp > 1 every
  // rank of the TP group makes the same calls in the same order (they are collective).
  static absl::StatusOr<std::unique_ptr<GptInference>> create(const GptConfig& cfg,
                                                              const InferenceShape& shape,
                                                              const Precision& prec,
                                                              const GptShard& shard = {});
  ~GptInference();

  // Parameters from the whole logical "master/<name>" tensors (a checkpoint's, see
  // model/train/checkpoint.h; this rank's TP slice of each), rounded to the act dtype; padding rows
  // of wte are 0. NotFound /
  // InvalidArgument naming the tensor when one is missing or has another shape. Syncs.
  absl::Status load(const TensorLookup& lookup, engine::Stream& stream);

  const GptConfig& config() const;
  const InferenceShape& shape() const;  // max_len resolved
  // Positions held by `slot` (0 after create; prefill sets it, decode adds 1).
  int64_t length(int64_t slot) const;

  // Logits ([vocab_size] f32 host) after position `position` of prompt `prompt` of a prefill.
  using PositionLogits = std::function<void(int64_t prompt, int64_t position, const float* logits)>;
  // Starts slots[i] over with prompts[i] (1 <= length <= max_len, ids in [0, vocab_size),
  // distinct slots in [0, max_batch)); logits (=, resized): [n, vocab_size] f32 host, row i of
  // prompt i's last position. With score[i] set, on_position(i, p, logits) also sees the logits
  // after every earlier position p of prompt i (those predicting token p + 1: scoring a prompt,
  // read out max_batch rows at a time). InvalidArgument naming the prompt and the limit
  // otherwise. Syncs.
  absl::Status prefill(const std::vector<int64_t>& slots,
                       const std::vector<std::vector<int32_t>>& prompts, std::vector<float>* logits,
                       engine::Stream& stream, const std::vector<bool>& score = {},
                       const PositionLogits& on_position = nullptr);
  // Appends tokens[i] at position length(slots[i]) (< max_len) of slots[i]; logits as prefill's,
  // of the appended positions. Syncs.
  absl::Status decode(const std::vector<int64_t>& slots, const std::vector<int32_t>& tokens,
                      std::vector<float>* logits, engine::Stream& stream);

 private:
  GptInference();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil::model
