// bin/convert import-megatron DIR CKPT_DIR [--keep-vocab-padding]: a Megatron-DeepSpeed
// (bigscience-workshop fork) DeepSpeed checkpoint of a BLOOM-style GPTModelPipe (any TP/PP/DP;
// fp16 with ZeRO-1, bf16 with BF16_Optimizer, or the universal folder of ds_to_universal.py,
// found automatically: io/torch_pt/megatron_ds.h) into an anvil checkpoint
// CKPT_DIR/step_<iteration>: fp32 master weights and Adam moments, mapped to anvil's names and
// layout (model/megatron_ds/names.h), and the run counters: iteration, consumed samples, the LR
// scheduler's position (num_steps, num_tokens, warmup_tokens), the Adam step and the loss
// scaler. The [model] section is the BLOOM family's from the fork's args (validated as
// bin/train validates it); [train] global_batch and seed and [data] seed come from args too.
// The rows that pad the vocabulary (padded_vocab_size over original_vocab_size) are dropped;
// --vocab-padding-in-loss keeps them as padding rows that the loss spans ([model] vocab_size =
// original_vocab_size, padded_vocab = padded_vocab_size, vocab_padding_in_loss = true), so the
// next steps are the fork's and the vocabulary stays the tokenizer's; --keep-vocab-padding (older)
// keeps them as ordinary rows ([model] vocab_size = padded_vocab_size), the same steps, but
// generation may then sample the padding ids.
// bin/convert export-megatron CKPT_DIR DIR [--tp N] [--pp N] [--dp N] [--dtype fp16|fp32]
// [--vocab-divisible-by N]: the inverse, the newest complete anvil checkpoint of a BLOOM-style
// [model] as the fork's folder at TP x PP x DP (default 1 x 1 x 1; io/torch_pt/megatron_ds.h
// write_megatron_ds): masters and moments in the ZeRO-1 partitions, module weights in --dtype
// (default fp16), the embedding padded to a multiple of divisible-by x TP rows (default [model]
// vocab_multiple) with zero rows, and the counters, lr schedule and loss scaler the import reads.
// Not done yet: export in the bf16 or universal layouts, ZeRO-2/3 files, RNG states.
#pragma once

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"
#include "io/checkpoint.h"
#include "io/torch_pt/megatron_ds.h"
#include "model/checkpoint_hf.h"
#include "model/hf_config.h"
#include "model/megatron_ds/names.h"
#include "model/train/checkpoint.h"
#include "model/train/lr_schedule.h"
#include "model/train/model_tensors.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"

namespace anvil::convert {

// What import_megatron does with the fork's padded vocabulary rows.
enum class MegatronPadding {
  kDrop,          // default: dropped (the loss spans the real vocabulary)
  kAsVocab,       // --keep-vocab-padding: real rows ([model] vocab_size = padded_vocab_size)
  kPaddingInLoss  // --vocab-padding-in-loss: kept as padding, in the loss as the fork's
};

inline absl::Status import_megatron(const std::string& dir, const std::string& ckpt_dir,
                                    MegatronPadding padding = MegatronPadding::kDrop) {
  namespace model = anvil::model;
  namespace io = anvil::io;
  if (!io::list_checkpoint_steps(ckpt_dir).empty()) {
    return absl::AlreadyExistsError(
        absl::StrCat(ckpt_dir, " already holds checkpoints: import into a new or empty directory"));
  }
  ANVIL_ASSIGN_OR_RETURN(io::torch_pt::MegatronDsCheckpoint c, io::torch_pt::read_megatron_ds(dir));
  if (padding == MegatronPadding::kAsVocab) c.vocab = c.padded_vocab;
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
      model_ini, "max_seq_len = ", c.seq_length, "\n",
      padding == MegatronPadding::kPaddingInLoss
          ? absl::StrCat("vocab_padding_in_loss = true\npadded_vocab = ", c.padded_vocab, "\n")
          : "",
      "[train]\nglobal_batch = ", c.global_batch, "\nseed = ", c.seed, "\n[data]\nseed = ", c.seed,
      "\nseq_len = ", c.seq_length, "\n");
  ANVIL_ASSIGN_OR_RETURN(model::TrainConfig cfg, model::load_train_config_string(ini, where, {}));
  cfg.tokenizer = {};
  ANVIL_ASSIGN_OR_RETURN(
      std::vector<engine::HostSlice> slices,
      model::megatron_ds_to_anvil(
          c.tensors,
          {c.num_heads, padding == MegatronPadding::kPaddingInLoss ? c.padded_vocab : c.vocab}));
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
      "imported %s (%s, TP%d x PP%d x DP%d, iteration %lld, %lld samples consumed) into %s; the "
      "settings it was trained with:\n%s",
      c.dir.c_str(),
      c.layout == "universal"   ? "universal checkpoint"
      : c.layout == "bf16_zero" ? "BF16_Optimizer"
                                : "ZeRO-1",
      c.tp, c.pp, c.dp, static_cast<long long>(c.iteration),
      static_cast<long long>(c.consumed_samples),
      io::checkpoint_step_dir(ckpt_dir, c.iteration).c_str(), ini.c_str());
  if (!c.rng_states.empty()) {
    // anvil's dropout draws from Philox counters of ([train] seed, step, element): torch's
    // generator states have no meaning there.
    std::printf(
        "not carried over: the fork's RNG states (%s); dropout masks after the import differ "
        "from those the fork would draw (nothing differs with hidden_dropout = "
        "attention_dropout = 0)\n",
        absl::StrJoin(c.rng_states, ", ").c_str());
  }
  return absl::OkStatus();
}

// export-megatron's options after CKPT_DIR DIR.
struct MegatronExportOptions {
  int tp = 1, pp = 1, dp = 1;
  io::torch_pt::DType dtype = io::torch_pt::DType::kF16;
  int64_t vocab_divisible_by = 0;  // 0: [model] vocab_multiple
};

inline absl::StatusOr<MegatronExportOptions> parse_megatron_export_options(
    const std::vector<std::string>& a) {
  MegatronExportOptions o;
  for (size_t i = 0; i < a.size(); i += 2) {
    if (i + 1 >= a.size()) return absl::InvalidArgumentError(absl::StrCat(a[i], " needs a value"));
    const std::string& k = a[i];
    const std::string& v = a[i + 1];
    int64_t n = 0;
    if (k == "--dtype") {
      if (v == "fp16") {
        o.dtype = io::torch_pt::DType::kF16;
      } else if (v == "fp32") {
        o.dtype = io::torch_pt::DType::kF32;
      } else {
        return absl::InvalidArgumentError(absl::StrCat(
            "--dtype ", v,
            ": unsupported dtype (fp16 or fp32; bf16 would be the fork's BF16_Optimizer layout, "
            "bf16_zero_* files, which export-megatron does not write)"));
      }
      continue;
    }
    if (!absl::SimpleAtoi(v, &n) || n < 1 || n > 4096) {
      return absl::InvalidArgumentError(absl::StrCat(k, " ", v, ": expected an integer >= 1"));
    }
    if (k == "--tp") {
      o.tp = static_cast<int>(n);
    } else if (k == "--pp") {
      o.pp = static_cast<int>(n);
    } else if (k == "--dp") {
      o.dp = static_cast<int>(n);
    } else if (k == "--vocab-divisible-by") {
      o.vocab_divisible_by = n;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option ", k, " (--tp, --pp, --dp, --dtype, --vocab-divisible-by)"));
    }
  }
  return o;
}

inline absl::Status export_megatron(const std::string& ckpt_dir, const std::string& dir,
                                    const MegatronExportOptions& o) {
  namespace model = anvil::model;
  namespace io = anvil::io;
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint ck,
                         io::open_newest_complete(ckpt_dir, -1, [](const std::string& w) {
                           std::fprintf(stderr, "convert: warning: %s\n", w.c_str());
                         }));
  const std::string where = ck.dir() + "/manifest.json (config)";
  const engine::ConfigSchema& schema = model::train_config_schema();
  ANVIL_ASSIGN_OR_RETURN(engine::Config ecfg,
                         engine::Config::load_string(ck.info().config, where, schema));
  // The fork's GPTModelPipe layout holds the BLOOM family only (ALiBi, embedding LayerNorm,
  // tied head, GELU MLP of 4 x d).
  absl::StatusOr<const model::HfFamily*> fam = model::hf_family_of(ecfg, schema);
  if (!fam.ok() || (*fam)->model_type != "bloom") {
    return absl::UnimplementedError(absl::StrCat(
        ck.dir(),
        ": unknown layout for export-megatron: the fork's GPTModelPipe checkpoint holds "
        "BLOOM-style models (ALiBi, embedding LayerNorm, tied head); this [model] is ",
        fam.ok() ? (*fam)->model_type : std::string(fam.status().message())));
  }
  // The config as the run parsed it (its [parallel] checked against its own world).
  const int64_t world = ecfg.get_int("parallel", "tp") * ecfg.get_int("parallel", "pp") *
                        std::max<int64_t>(1, ecfg.get_int("parallel", "dp"));
  ANVIL_ASSIGN_OR_RETURN(model::TrainConfig cfg,
                         model::parse_train_config(ecfg, static_cast<int>(world)));
  const model::GptConfig& m = cfg.model;
  if (m.ffn() != 4 * m.d_model) {
    return absl::UnimplementedError(absl::StrCat(where, ": [model] ffn_hidden ", m.ffn(),
                                                 " (the fork's BLOOM layout has 4 x d_model)"));
  }
  io::torch_pt::MegatronDsCheckpoint c;
  c.tp = o.tp;
  c.pp = o.pp;
  c.dp = o.dp;
  c.num_layers = m.n_layers;
  c.hidden_size = m.d_model;
  c.num_heads = m.n_heads;
  c.ffn_hidden = m.ffn();
  c.vocab = m.vocab_size;
  const int64_t multiple =
      (o.vocab_divisible_by > 0 ? o.vocab_divisible_by : m.vocab_multiple) * o.tp;
  c.padded_vocab = (m.vocab_size + multiple - 1) / multiple * multiple;
  // Trained with the padded rows in the loss: they are parameters, written as the fork's padded
  // rows, so the fork must pad to exactly as many.
  ANVIL_ASSIGN_OR_RETURN(const int64_t saved_padded,
                         model::saved_loss_padding(ck.info().model, 1, ck.dir()));
  if (saved_padded > 0 && saved_padded != c.padded_vocab) {
    return absl::InvalidArgumentError(
        absl::StrCat(ck.dir(), " was trained with [model] vocab_padding_in_loss = true over ",
                     saved_padded, " padded vocabulary rows, but the fork at --tp ", o.tp, " pads ",
                     m.vocab_size, " to ", c.padded_vocab,
                     ": choose --vocab-divisible-by (x --tp) so that it pads to ", saved_padded));
  }
  c.layernorm_epsilon = ecfg.get_float("model", "ln_eps");  // as written (m.ln_eps: a float)
  c.seq_length = cfg.data.seq_len;
  c.global_batch = cfg.train.global_batch;
  const std::map<std::string, int64_t>& st = ck.info().state;
  auto state = [&](const char* k) {
    auto it = st.find(k);
    return it == st.end() ? int64_t{0} : it->second;
  };
  c.iteration = ck.info().step;
  c.adam_step = state("optimizer_steps");
  c.consumed_samples = state("consumed_samples");
  c.consumed_valid_samples = state("consumed_valid_samples");
  c.consumed_tokens = state("lr_tokens");
  c.seed = st.count("seed") ? state("seed") : static_cast<int64_t>(cfg.train.seed);
  c.lr_scheduler = {{"num_steps", static_cast<double>(state("lr_samples"))},
                    {"num_tokens", static_cast<double>(state("lr_tokens"))},
                    {"warmup_tokens", static_cast<double>(state("lr_warmup_tokens"))}};
  const std::map<std::string, double>& gs = ck.info().grad_scaler;
  if (gs.count("scale")) {
    // import-megatron's inverse: growth = cur_iter - last_overflow_iter - 1.
    const auto get = [&](const char* k) { return gs.count(k) ? gs.at(k) : 0.0; };
    c.loss_scaler = {{"cur_scale", get("scale")},
                     {"cur_iter", static_cast<double>(c.iteration)},
                     {"last_overflow_iter", c.iteration - 1 - get("growth_tracker")},
                     {"cur_hysteresis", get("hysteresis_tracker")},
                     {"scale_window", static_cast<double>(cfg.train.precision.dynamic.window)},
                     {"min_scale", cfg.train.precision.dynamic.min_scale}};
  }
  // The tensors: every master, and the moments (zeros for a weights-only checkpoint).
  std::vector<engine::HostSlice> slices;
  bool moments = true;
  for (const std::string& name : ck.tensor_names()) {
    if (!absl::StartsWith(name, model::kMasterState)) continue;
    ANVIL_ASSIGN_OR_RETURN(engine::HostSlice t, ck.read(name));
    const std::string base = name.substr(sizeof(model::kMasterState) - 1);
    for (const char* s : {model::kExpAvgState, model::kExpAvgSqState}) {
      absl::StatusOr<engine::HostSlice> mom = ck.read(s + base);
      if (!mom.ok()) {
        moments = false;
        mom = t;
        mom->tensor = s + base;
        std::fill(mom->data.begin(), mom->data.end(), 0.0f);
      }
      slices.push_back(*std::move(mom));
    }
    slices.push_back(std::move(t));
  }
  if (!moments) {
    std::fprintf(stderr, "convert: warning: %s holds no Adam moments: exported as zeros\n",
                 ck.dir().c_str());
  }
  ANVIL_ASSIGN_OR_RETURN(
      c.tensors, model::anvil_to_megatron_ds(slices, {m.n_heads, m.vocab_size}, c.padded_vocab));
  // The args: the run's schedule (the checkpoint's when it kept one) and optimizer settings.
  model::TrainerState ts;
  std::map<std::string, double> lr = ck.info().lr_schedule;
  if (lr.empty()) lr = model::checkpoint_lr_schedule(cfg, ts);
  io::torch_pt::MegatronDsArgs a;
  a.params_dtype = o.dtype;
  a.micro_batch = cfg.train.micro_batch;
  a.train_samples = cfg.train.run_samples();
  a.vocab_divisible_by = multiple / o.tp;
  a.lr = lr["lr"];
  a.min_lr = lr["min_lr"];
  a.current_lr = lr.count("current_lr") ? lr["current_lr"] : a.lr;
  a.warmup_samples = static_cast<int64_t>(lr["warmup_samples"]);
  a.decay_samples = static_cast<int64_t>(lr["decay_samples"]);
  a.decay_style = std::string(
      model::decay_style_name(static_cast<model::DecayStyle>(static_cast<int>(lr["decay_style"]))));
  a.weight_decay = cfg.optim.weight_decay;
  a.beta1 = cfg.optim.beta1;
  a.beta2 = cfg.optim.beta2;
  a.eps = cfg.optim.eps;
  a.clip_grad = cfg.optim.clip_grad;
  ANVIL_RETURN_IF_ERROR(io::torch_pt::write_megatron_ds(c, a, dir));
  std::printf(
      "exported %s (step %lld, %lld samples consumed) to %s/global_step%lld as the fork's "
      "DeepSpeed checkpoint at TP%d x PP%d x DP%d (%s module weights, vocabulary %lld padded to "
      "%lld)\n",
      ck.dir().c_str(), static_cast<long long>(c.iteration),
      static_cast<long long>(c.consumed_samples), dir.c_str(), static_cast<long long>(c.iteration),
      o.tp, o.pp, o.dp, o.dtype == io::torch_pt::DType::kF16 ? "fp16" : "fp32",
      static_cast<long long>(c.vocab), static_cast<long long>(c.padded_vocab));
  return absl::OkStatus();
}

}  // namespace anvil::convert
