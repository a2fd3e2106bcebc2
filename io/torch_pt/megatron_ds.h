// A Megatron-DeepSpeed (bigscience-workshop fork) DeepSpeed checkpoint folder read back into
// whole tensors under the fork's names: DIR/latest names the tag; DIR/<tag>/ holds
//   mp_rank_YY_model_states.pt        (YY = pp x tp_size + tp) args, iteration, lr_scheduler,
//                                     param_shapes (per optimizer group: pipe-module name ->
//                                     TP-local shape, in the order of the flat ZeRO buffers)
//   zero_pp_rank_D_mp_rank_YY_optim_states.pt   ZeRO-1: per group the D-th partition of the
//                                     flat fp32 master weights (the last one without its
//                                     padding) and of Adam's exp_avg / exp_avg_sq (with it)
//   layer_XX-model_TT-model_states.pt the fp16/bf16 module weights (not needed: the fp32
//                                     masters are the state)
// The degrees come from the files (tp: layer_01 files; pp: mp_rank files / tp; dp: ZeRO files /
// mp_rank files). Each group's partitions are concatenated over DP and cut by param_shapes;
// TP pieces are joined (row-parallel dense / dense_4h_to_h weights by columns, column-parallel
// QKV, dense_h_to_4h and the vocab-parallel embedding by rows; the rest is replicated: TP
// rank 0's copy). Pipe names map to the fork's: tied_modules.embed.word_embeddings.* ->
// word_embeddings.* (the first stage's copy), "<3 + i>.<sub>" -> layers.<i>.<sub>,
// "<4 + num_layers>.<w|b>" -> final_layernorm.<w|b>.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/host_slice.h"

namespace anvil::io::torch_pt {

struct MegatronDsCheckpoint {
  std::string dir;  // DIR/<tag>
  int tp = 1, pp = 1, dp = 1;
  int64_t iteration = 0;
  int64_t num_layers = 0, hidden_size = 0, num_heads = 0, ffn_hidden = 0;
  int64_t padded_vocab = 0, vocab = 0;  // checkpoint_info's original_vocab_size
  int64_t consumed_samples = 0, consumed_valid_samples = 0, consumed_tokens = 0, seed = 0;
  int64_t global_batch = 0, seq_length = 0;
  double layernorm_epsilon = 1e-5;
  std::map<std::string, double> lr_scheduler;  // the fork's AnnealingLR state_dict (numbers)
  std::map<std::string, double> loss_scaler;   // DynamicLossScaler's numbers (cur_scale ...)
  int64_t adam_step = 0;                       // base optimizer param_groups[0]["step"]
  // "fp32/<fork name>", "exp_avg/<fork name>", "exp_avg_sq/<fork name>": whole tensors.
  std::map<std::string, engine::HostSlice> tensors;
};

// Errors name the file and the field (an unknown parameter name, a missing record, sizes that
// do not add up).
absl::StatusOr<MegatronDsCheckpoint> read_megatron_ds(const std::string& dir);

}  // namespace anvil::io::torch_pt
