// A Megatron-DeepSpeed (bigscience-workshop fork) DeepSpeed checkpoint read back into whole
// tensors under the fork's names. DIR is a checkpoint root (DIR/latest, else
// DIR/latest_universal, names the tag folder), a tag folder itself (global_stepN/), or a universal
// folder (global_stepN_universal/, holding zero/). The tag folder holds
//   mp_rank_YY_model_states.pt        (YY = pp x tp_size + tp) args, iteration, lr_scheduler,
//                                     param_shapes (per optimizer group: pipe-module name ->
//                                     TP-local shape, in the order of the flat ZeRO buffers)
// and one of three layouts:
//   zero_pp_rank_D_mp_rank_YY_optim_states.pt   ZeRO-1 (fp16): per group the D-th partition of
//                                     the flat fp32 master weights (the last one without its
//                                     padding) and of Adam's exp_avg / exp_avg_sq (with it)
//   bf16_zero_pp_rank_D_mp_rank_YY_optim_states.pt   DeepSpeed's BF16_Optimizer (--bf16): the
//                                     same keys, the fp32 partitions with their padding
//                                     (group_paddings, "groups_padding" before 0.7), no loss scaler
//   zero/<pipe-module name>/{fp32,exp_avg,exp_avg_sq}.pt   the universal layout of
//                                     ds_to_universal.py: whole TP-merged tensors under "param"
//                                     (the embedding with or without its vocabulary padding rows),
//                                     step.pt with the Adam step in newer DeepSpeed; the
//                                     mp_rank files are copies of the original's
//   layer_XX-model_TT-model_states.pt the fp16/bf16 module weights (not needed: the fp32
//                                     masters are the state)
// The degrees come from the files (tp: layer_01 files; pp: mp_rank files / tp; dp: ZeRO files /
// mp_rank files; universal: the args'). Each group's partitions are concatenated over DP and cut
// by param_shapes; TP pieces are joined (row-parallel dense / dense_4h_to_h weights by columns,
// column-parallel QKV, dense_h_to_4h and the vocab-parallel embedding by rows; the rest is
// replicated: TP rank 0's copy). Pipe names map to the fork's: tied_modules.embed.word_embeddings.*
// -> word_embeddings.* (the first stage's copy), "<3 + i>.<sub>" -> layers.<i>.<sub>,
// "<4 + num_layers>.<w|b>" -> final_layernorm.<w|b>.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/host_slice.h"
#include "io/torch_pt/value.h"

namespace anvil::io::torch_pt {

struct MegatronDsCheckpoint {
  std::string dir;     // DIR/<tag>
  std::string layout;  // "zero" (fp16 ZeRO-1), "bf16_zero" (BF16_Optimizer) or "universal"
  int tp = 1, pp = 1, dp = 1;
  // args' tensor / pipeline / data parallel sizes (dp: the engine's dp_world_size when saved)
  int saved_tp = 1, saved_pp = 1, saved_dp = 1;
  int64_t global_steps = 0, skipped_steps = 0;  // the DeepSpeed engine's counters
  int64_t iteration = 0;
  int64_t num_layers = 0, hidden_size = 0, num_heads = 0, ffn_hidden = 0;
  int64_t padded_vocab = 0, vocab = 0;  // checkpoint_info's original_vocab_size
  int64_t consumed_samples = 0, consumed_valid_samples = 0, consumed_tokens = 0, seed = 0;
  int64_t global_batch = 0, seq_length = 0;
  double layernorm_epsilon = 1e-5;
  std::map<std::string, double> lr_scheduler;  // the fork's AnnealingLR state_dict (numbers)
  std::map<std::string, double> loss_scaler;   // DynamicLossScaler's numbers (cur_scale ...)
  // The base optimizer's step (param_groups[0]["step"], else state[0]["step"]; universal:
  // step.pt, else global_steps - skipped_steps + 1, the zero-gradient step the ZeRO and BF16
  // optimizers take at start counted as apex's FusedAdam counts it).
  int64_t adam_step = 0;
  // The RNG states the fork saves unless --no-save-rng (random_rng_state, np_rng_state,
  // torch_rng_state, cuda_rng_state, rng_tracker_states), named as found in
  // mp_rank_00_model_states.pt. Read, never carried over: see bin/convert_megatron.h.
  std::vector<std::string> rng_states;
  // "fp32/<fork name>", "exp_avg/<fork name>", "exp_avg_sq/<fork name>": whole tensors.
  std::map<std::string, engine::HostSlice> tensors;
};

// Errors name the file and the field (an unknown parameter name, a missing record, sizes that
// do not add up).
absl::StatusOr<MegatronDsCheckpoint> read_megatron_ds(const std::string& dir);

// What write_megatron_ds puts into the fork's args Namespace and lr_scheduler beyond the
// MegatronDsCheckpoint fields (the fork's tools and its resume read them).
struct MegatronDsArgs {
  DType params_dtype = DType::kF16;  // the layer files' module weights: kF16 or kF32
  int64_t micro_batch = 1, train_samples = 0, vocab_divisible_by = 128;
  double lr = 0, min_lr = 0, weight_decay = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double clip_grad = 1.0;
  double current_lr = 0;  // the param groups' lr (the schedule's at the iteration)
  int64_t warmup_samples = 0, decay_samples = 0;
  std::string decay_style = "cosine";  // the fork's lr_decay_style name
};

// Writes c (whole tensors "fp32/", "exp_avg/", "exp_avg_sq/" + fork name, as read_megatron_ds
// returns them; word_embeddings.weight already padded to c.padded_vocab rows) as the fork's
// DeepSpeed folder at c.tp x c.pp x c.dp, the layout read_megatron_ds reads and
// scripts/make_megatron_ds_fixture.py writes: DIR/latest = global_step<iteration>, and in it
//   layer_XX-model_TT-model_states.pt  (DP rank 0's module weights in args.params_dtype: 01 the
//                                      embedding (+ its LayerNorm), 03.. the layers, 04+L the
//                                      final LayerNorm; TP pieces as the fork splits them)
//   mp_rank_YY_model_states.pt         (args, iteration, tokens, lr_scheduler, param_shapes,
//                                      checkpoint_info; no RNG states: resume the fork with
//                                      --no-load-rng)
//   zero_pp_rank_D_mp_rank_YY_optim_states.pt  (ZeRO-1: three param groups per stage (the weights
//                                      in two halves, then LayerNorms and biases), each flattened,
//                                      padded to a multiple of 2 x dp, cut into dp partitions)
// c.lr_scheduler: num_steps, num_tokens, warmup_tokens (the schedule's position); c.loss_scaler:
// DynamicLossScaler's fields (cur_scale, last_overflow_iter, cur_hysteresis ...; absent ones get
// DeepSpeed's defaults). Layers are split evenly over the stages. InvalidArgument for degrees that
// do not divide (layers by pp, heads / ffn / padded vocabulary by tp), a missing tensor, an
// existing DIR/latest.
absl::Status write_megatron_ds(const MegatronDsCheckpoint& c, const MegatronDsArgs& args,
                               const std::string& dir);

}  // namespace anvil::io::torch_pt
