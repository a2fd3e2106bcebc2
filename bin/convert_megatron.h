// bin/convert import-megatron DIR CKPT_DIR: a Megatron-DeepSpeed (bigscience-workshop fork)
// DeepSpeed checkpoint folder of a BLOOM-style GPTModelPipe (fp16, ZeRO-1, any TP/PP/DP) into an
// anvil checkpoint CKPT_DIR/step_<iteration>: fp32 master weights and Adam moments (from the
// ZeRO-1 partitions; io/torch_pt/megatron_ds.h), mapped to anvil's names and layout
// (model/megatron_ds/names.h), and the run counters: iteration, consumed samples, the LR
// scheduler's position (num_steps, num_tokens, warmup_tokens), the Adam step and the loss
// scaler. The [model] section is the BLOOM family's from the fork's args (validated as
// bin/train validates it); [train] global_batch and seed and [data] seed come from args too.
// Not done yet: export-megatron, the universal layout (ds_to_universal.py), bf16 ZeRO files.
#pragma once

#include <cstdio>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "io/checkpoint.h"
#include "io/torch_pt/megatron_ds.h"
#include "model/checkpoint_hf.h"
#include "model/hf_config.h"
#include "model/megatron_ds/names.h"
#include "model/train/checkpoint.h"
#include "model/train/model_tensors.h"
#include "model/train/train_config.h"

namespace anvil::convert {

inline absl::Status import_megatron(const std::string& dir, const std::string& ckpt_dir) {
  namespace model = anvil::model;
  namespace io = anvil::io;
  if (!io::list_checkpoint_steps(ckpt_dir).empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat(ckpt_dir, " already holds checkpoints: import into a new or empty directory"));
  }
  ANVIL_ASSIGN_OR_RETURN(io::torch_pt::MegatronDsCheckpoint c, io::torch_pt::read_megatron_ds(dir));
  const std::string where = c.dir + "/mp_rank_00_model_states.pt (args)";
  if (c.ffn_hidden != 4 * c.hidden_size) {
    return absl::UnimplementedError(absl::StrCat(where, ": ffn_hidden_size ", c.ffn_hidden,
                                                 " (the BLOOM layout has 4 x hidden_size)"));
  }
  // The BLOOM family's [model] settings from the fork's args, as config.json fields.
  model::HfJsonFields fields = {{"vocab_size", std::to_string(c.vocab)},
                                {"hidden_size", std::to_string(c.hidden_size)},
                                {"n_layer", std::to_string(c.num_layers)},
                                {"n_head", std::to_string(c.num_heads)},
                                {"layer_norm_epsilon", absl::StrCat(c.layernorm_epsilon)}};
  ANVIL_ASSIGN_OR_RETURN(const model::HfFamily* f, model::hf_family("bloom", fields));
  ANVIL_ASSIGN_OR_RETURN(model::HfImportedModel m,
                         model::hf_import_model(*f, fields, model::train_config_schema(), where));
  // (BLOOM's config.json has no length: the family's import default is replaced by the fork's)
  std::string model_ini = m.ini;
  const size_t at = model_ini.find("max_seq_len = ");
  if (at != std::string::npos) model_ini.erase(at, model_ini.find('\n', at) + 1 - at);
  const std::string ini = absl::StrCat(
      model_ini, "max_seq_len = ", c.seq_length, "\n[train]\nglobal_batch = ", c.global_batch,
      "\nseed = ", c.seed, "\n[data]\nseed = ", c.seed, "\nseq_len = ", c.seq_length, "\n");
  ANVIL_ASSIGN_OR_RETURN(model::TrainConfig cfg, model::load_train_config_string(ini, where, {}));
  cfg.tokenizer = {};
  ANVIL_ASSIGN_OR_RETURN(std::vector<engine::HostSlice> slices,
                         model::megatron_ds_to_anvil(c.tensors, {c.num_heads, c.vocab}));
  std::vector<engine::HostSlice> masters;
  for (const engine::HostSlice& s : slices) {
    if (s.tensor.rfind(model::kMasterState, 0) == 0) {
      engine::HostSlice t = s;
      t.tensor = s.tensor.substr(sizeof(model::kMasterState) - 1);
      masters.push_back(std::move(t));
    }
  }
  ANVIL_RETURN_IF_ERROR(model::check_model_tensors(cfg, masters, where));
  io::CheckpointInfo info;
  info.step = c.iteration;
  info.config = ini;
  info.model = model::checkpoint_model_record(cfg);
  auto lr = [&](const char* k) {
    auto it = c.lr_scheduler.find(k);
    return it == c.lr_scheduler.end() ? int64_t{0} : static_cast<int64_t>(it->second);
  };
  info.state = {{"step", c.iteration},
                {"optimizer_steps", c.adam_step},
                {"micro_batches", 0},
                {"consumed_samples", c.consumed_samples},
                {"consumed_valid_samples", c.consumed_valid_samples},
                {"lr_samples", lr("num_steps")},
                {"lr_tokens", lr("num_tokens")},
                {"lr_warmup_tokens", lr("warmup_tokens")},
                {"seed", c.seed},
                {"data_seed", c.seed}};
  info.layout = {{"tp", c.tp}, {"pp", c.pp}, {"dp", c.dp}, {"zero_stage", 1}};
  if (c.loss_scaler.count("cur_scale")) {
    const double window = c.loss_scaler.count("scale_window") ? c.loss_scaler["scale_window"] : 1;
    const double since = c.loss_scaler["cur_iter"] - c.loss_scaler["last_overflow_iter"] - 1;
    info.grad_scaler = {
        {"scale", c.loss_scaler["cur_scale"]},
        {"growth_tracker",
         since > 0 ? static_cast<int64_t>(since) % static_cast<int64_t>(window) : 0},
        {"hysteresis_tracker", c.loss_scaler["cur_hysteresis"]}};
  }
  ANVIL_RETURN_IF_ERROR(io::save_checkpoint(ckpt_dir, info, slices, 0));
  std::printf(
      "imported %s (TP%d x PP%d x DP%d, iteration %lld, %lld samples consumed) into %s; the "
      "settings it was trained with:\n%s",
      c.dir.c_str(), c.tp, c.pp, c.dp, static_cast<long long>(c.iteration),
      static_cast<long long>(c.consumed_samples),
      io::checkpoint_step_dir(ckpt_dir, c.iteration).c_str(), ini.c_str());
  return absl::OkStatus();
}

}  // namespace anvil::convert
