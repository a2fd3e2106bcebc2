// What a GPT rank (and through CheckpointModel a T5 rank: model/t5/t5_checkpoint.h) puts into a
// checkpoint and takes out of one, in logical (unsharded) terms, so a checkpoint saved under
// one (tp, pp, dp, zero_stage, virtual_stages, sequence_parallel) layout loads into any other. The
// files are io/'s business (io/checkpoint.h); the two meet in engine::HostSlice boxes and whole
// logical tensors.
//
// Tensors: "master/<name>", "exp_avg/<name>", "exp_avg_sq/<name>" (f32 master weights and
// AdamW moments) for every parameter of the ParamTable, <name> the HF GPT-2 name
// ("h.3.attn.c_attn.weight"), shape the whole model's ([n_embd, n_embd] ..., weights [out, in]),
// except wte.weight and lm_head.weight: [vocab_size, d_model], the padding rows of the padded
// vocabulary left out (they are 0; a layout with another padding gets 0 rows again on load);
// with [model] vocab_padding_in_loss they are parameters and kept: [padded(), d_model].
// Saving: every element is written by exactly one rank: TP-replicated parameters by TP rank 0,
// the tied embedding by the first stage (the last stage's LM-head copy is equal), replicas over
// DP by DP rank 0, and under ZeRO each DP rank its own pieces. Each rank's part of a TP-split
// parameter (c_attn: q | k | v blocks split separately) is cut into boxes of the whole tensor.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/host_slice.h"
#include "engine/stream.h"
#include "model/model.h"
#include "model/stack/gpt.h"
#include "model/train/arch_record.h"  // the model record, checked on load
#include "model/train/train_config.h"
#include "model/train/trainer.h"

namespace anvil::parallel {
class ZeroPartition;
}

namespace anvil::model {

inline constexpr char kMasterState[] = "master/";
inline constexpr char kExpAvgState[] = "exp_avg/";
inline constexpr char kExpAvgSqState[] = "exp_avg_sq/";

// The logical shape of parameter `p` of a model with `vocab_size` tokens (the embedding's
// logical rows), p being a rank's shard under TP degree `tp`.
std::vector<int64_t> logical_shape(const Param& p, int64_t vocab_size, int tp);
inline std::vector<int64_t> logical_shape(const Param& p, const GptConfig& cfg, int tp) {
  return logical_shape(p, cfg.loss_vocab(), tp);
}

// What the checkpoint code needs of one rank's model, whichever model it is (GPT, T5): its
// parameter table and flat buffers (whole, or ZeRO shards of `zero`'s partition), its TP
// coordinates, which of its parameters it writes when several pipeline stages hold a copy
// (GPT: the tied embedding on the first stage only; T5: the first stage holding the shared
// embedding or a relative table; null: all; a load sets every copy), and what to run after a load
// overwrote the values (ZeRO-3: gather again; may be empty).
struct CheckpointModel {
  const ParamTable* table = nullptr;
  FlatBuffers buffers;
  int64_t vocab_size = 0;  // the embedding's logical rows: GptConfig/T5Config::loss_vocab()
  int tp = 1, tp_rank = 0;
  std::function<bool(const Param&)> writes;
  const parallel::ZeroPartition* zero = nullptr;  // null without ZeRO
  std::function<void(engine::Stream&)> loaded;
};

// The boxes of master weights and AdamW moments this rank writes (see the file comment).
// dp_rank: this rank's DP coordinate (decides who writes DP replicas without ZeRO). Syncs.
std::vector<engine::HostSlice> checkpoint_slices(const CheckpointModel& model, int dp_rank,
                                                 engine::Stream& stream);
std::vector<engine::HostSlice> gpt_checkpoint_slices(GptModel& model, int dp_rank,
                                                     engine::Stream& stream);

// TensorLookup: a whole logical tensor by name (model/model.h).

// Sets every master weight this rank holds (and the compute copy, rounded to its dtype), and
// unless weights_only the AdamW moments, from the whole logical tensors. InvalidArgument
// naming the tensor when a shape differs from the model's. Syncs.
absl::Status load_checkpoint_tensors(const CheckpointModel& model, const TensorLookup& lookup,
                                     bool weights_only, engine::Stream& stream);
absl::Status gpt_load_checkpoint(GptModel& model, const TensorLookup& lookup, bool weights_only,
                                 engine::Stream& stream);

// The run counters a checkpoint keeps: the TrainerState (step, optimizer steps, micro-batches,
// consumed training and validation samples, the lr scheduler's position), train_samples
// (LoopConfig::run_samples: Megatron's sample order is a shuffle over the whole run, so it
// depends on it) and the seeds of init/dropout and of the data order.
std::map<std::string, int64_t> checkpoint_counters(const TrainerState& s, const TrainConfig& cfg);
// Back from a checkpoint's counters. InvalidArgument naming the numbers when the config would
// not continue the same sample stream: [train] seed or [data] seed. Other batch sizes are
// allowed, as Megatron-DeepSpeed allows them: the run continues from the consumed samples
// (batch_change_note says so). Counters older
// checkpoints lack take Megatron's fallbacks (validation: step // eval_interval evaluations of
// eval_iters global batches; the lr position: the applied steps' samples).
absl::StatusOr<TrainerState> trainer_state_from(const std::map<std::string, int64_t>& counters,
                                                const TrainConfig& cfg);
// "" when `s` consumed the samples that `s.step` steps of cfg's global_batch and
// rampup_batch_size give, else a note naming both (the batch size changed since the save).
std::string batch_change_note(const TrainerState& s, const TrainConfig& cfg);
// Training samples a run resumed from `s` reads: its consumed samples plus the remaining steps
// at cfg's global batch (an upper bound under ramp-up).
int64_t resumed_run_samples(const TrainerState& s, const TrainConfig& cfg);
// The parallel layout (tp, pp, dp, zero_stage, virtual_stages, sequence_parallel; a pipelined
// T5 also pp_split_rank) and the LR schedule's parameters (in samples) with the lr the next step
// of `state` uses, for the manifest (informative: loading works from any layout, and the
// schedule's position is one of the counters).
std::map<std::string, int64_t> checkpoint_layout(const TrainConfig& cfg);
// On resume: the lr schedule to continue with, from the checkpoint's checkpoint_lr_schedule
// map `saved` (of the checkpoint at `where`) and the config. Equal values (or decay_style absent,
// in older checkpoints): none (the config's). Differing: the config's with [checkpoint]
// override_lr_scheduler, the checkpoint's with use_checkpoint_lr_scheduler, else
// InvalidArgument listing each differing value (Megatron's AnnealingLR asserts). `note` gets
// the log line of a replaced schedule ("" otherwise).
absl::StatusOr<std::optional<LrSchedule>> resume_lr_schedule(
    const std::map<std::string, double>& saved, const TrainConfig& cfg, const std::string& where,
    std::string* note);
std::map<std::string, double> checkpoint_lr_schedule(const TrainConfig& cfg,
                                                     const TrainerState& state);

}  // namespace anvil::model
