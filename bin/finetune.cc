// bin/finetune: classification finetuning of a GPT through its last token (docs/eval.md,
// model/finetune_cls.h), from an ini config with a [finetune] section:
//   build/bin/finetune CONFIG [section.key=value ...]
// Starts from [checkpoint] load (weights only) or a fresh model, trains [train] steps on
// [finetune] train_data with global_batch examples per step (micro_batch per forward), logs
// the loss every log_interval steps and the dev accuracy before the first step, every
// eval_interval steps and at the end, and saves the result into [checkpoint] save. One rank;
// the example order is its own (a shuffle per epoch seeded by [data] seed).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/log.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "io/checkpoint.h"
#include "io/eval_text.h"
#include "io/tokenizer.h"
#include "model/checkpoint.h"
#include "model/finetune_cls.h"
#include "model/gpt.h"
#include "model/train_config.h"

namespace {

namespace model = anvil::model;
namespace io = anvil::io;
using anvil::engine::log_info;

constexpr char kUsage[] = "usage: finetune CONFIG [section.key=value ...] (docs/eval.md)\n";

absl::StatusOr<std::vector<model::ClsExample>> load_examples(const std::string& path,
                                                             const io::Tokenizer& tok) {
  ANVIL_ASSIGN_OR_RETURN(std::vector<io::LabeledText> texts, io::load_labeled_texts(path, tok));
  std::vector<model::ClsExample> out;
  for (io::LabeledText& t : texts) out.push_back({std::move(t.tokens), t.label});
  return out;
}

absl::Status save(const model::TrainConfig& cfg, const std::string& config_text, model::GptModel& m,
                  int64_t steps, anvil::engine::Stream& s) {
  const std::string& dir = cfg.checkpoint.save;
  const std::string token = absl::StrCat(::getpid());
  ANVIL_RETURN_IF_ERROR(io::begin_checkpoint(dir, steps, token));
  const std::string tmp = io::checkpoint_tmp_dir(dir, steps, token);
  ANVIL_RETURN_IF_ERROR(io::write_checkpoint_shard(tmp, 0, model::gpt_checkpoint_slices(m, 0, s)));
  io::CheckpointInfo info;
  info.step = steps;
  info.config = config_text;
  // Weights for `finetune = true` loads; the counters say how many updates made them.
  model::TrainerState state;
  state.step = state.optimizer_steps = steps;
  info.state = model::checkpoint_counters(state, cfg);
  info.layout = model::checkpoint_layout(cfg);
  info.lr_schedule = model::checkpoint_lr_schedule(cfg, state);
  return io::finish_checkpoint(dir, tmp, 1, info, cfg.checkpoint.keep_last);
}

absl::Status run(const std::string& path, const std::vector<std::string>& overrides) {
  anvil::engine::Config raw;
  ANVIL_ASSIGN_OR_RETURN(model::TrainConfig cfg, model::load_train_config(path, overrides, &raw));
  const model::FinetuneConfig& f = cfg.finetune;
  if (f.train_data.empty()) {
    return absl::InvalidArgumentError(path + ": [finetune] train_data is not set");
  }
  const model::TokenizerConfig& t = cfg.tokenizer;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<io::Tokenizer> tok,
                         io::make_tokenizer({t.type, t.vocab_file, t.merge_file}));
  std::vector<int32_t> label_tokens;
  for (const std::string& w : f.labels) {
    const std::vector<int32_t> ids = tok->encode(w);
    if (ids.size() != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "[finetune] labels: \"%s\" is %d tokens of the %s tokenizer; each label must be one", w,
          ids.size(), tok->name()));
    }
    label_tokens.push_back(ids[0]);
  }
  const int32_t pad =
      static_cast<int32_t>(tok->special().eod >= 0 ? tok->special().eod : cfg.data.eod_token);
  ANVIL_ASSIGN_OR_RETURN(model::ClsTask task,
                         model::ClsTask::create(label_tokens, cfg.model.vocab_size, pad));
  ANVIL_ASSIGN_OR_RETURN(std::vector<model::ClsExample> train, load_examples(f.train_data, *tok));
  ANVIL_RETURN_IF_ERROR(task.check(train));
  std::vector<model::ClsExample> dev;
  if (!f.dev_data.empty()) {
    ANVIL_ASSIGN_OR_RETURN(dev, load_examples(f.dev_data, *tok));
    ANVIL_RETURN_IF_ERROR(task.check(dev));
  }

  const anvil::engine::LogContext ctx;
  ANVIL_ASSIGN_OR_RETURN(model::GptPrecision prec,
                         model::resolve_precision(cfg.train.device, cfg.train.precision.mode));
  anvil::engine::Stream s = anvil::engine::Stream::cpu();
  if (prec.device == anvil::engine::Device::kCuda) {
    ANVIL_ASSIGN_OR_RETURN(s, anvil::engine::Stream::cuda(0));
  }
  const model::GptRunShape shape{cfg.train.micro_batch, cfg.data.seq_len};
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<model::GptModel> m,
                         model::GptModel::create(cfg.model, shape, prec, cfg.train.seed));
  if (!cfg.checkpoint.load.empty()) {
    ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c,
                           io::open_newest_complete(
                               cfg.checkpoint.load, cfg.checkpoint.load_step,
                               [&](const std::string& w) { anvil::engine::log_warning(ctx, w); }));
    ANVIL_RETURN_IF_ERROR(model::gpt_load_checkpoint(
        *m, [&](const std::string& name) { return c.read(name); }, /*weights_only=*/true, s));
    log_info(ctx, absl::StrCat("finetune: weights of ", c.dir()));
  }
  log_info(ctx, absl::StrFormat("finetune: %d training and %d dev examples, %d classes (%s), "
                                "%d steps of %d examples, seq_len %d, %s",
                                train.size(), dev.size(), label_tokens.size(),
                                raw.get_string("finetune", "labels"), cfg.train.steps,
                                cfg.train.global_batch, cfg.data.seq_len,
                                anvil::engine::device_name(prec.device)));

  const int64_t steps = cfg.train.steps;
  const int width = static_cast<int>(std::to_string(steps).size());
  auto evaluate = [&](int64_t step) {
    if (dev.empty()) return;
    const model::ClsResult r = task.evaluate(*m, shape, dev, s);
    log_info(ctx, absl::StrFormat("step %*d/%d | dev accuracy %.4f (%d/%d) | dev loss %.4f", width,
                                  step, steps, r.accuracy(), r.correct, r.total, r.loss()));
  };
  // Each epoch visits the training examples in a fresh shuffle ([data] seed); a step takes the
  // next global_batch of them.
  std::mt19937_64 rng(cfg.data.seed);
  std::vector<size_t> order(train.size());
  size_t next = order.size();
  std::vector<model::ClsExample> batch;
  evaluate(0);
  double loss_sum = 0.0;
  int64_t loss_steps = 0;
  for (int64_t step = 1; step <= steps; ++step) {
    batch.clear();
    while (static_cast<int64_t>(batch.size()) < cfg.train.global_batch) {
      if (next == order.size()) {
        std::iota(order.begin(), order.end(), 0);
        std::shuffle(order.begin(), order.end(), rng);
        next = 0;
      }
      batch.push_back(train[order[next++]]);
    }
    const model::OptimConfig& o = cfg.optim;
    const double lr = o.schedule.at(step);
    double norm = 0.0;
    loss_sum += task.train_step(
        *m, shape, batch,
        {static_cast<float>(lr), static_cast<float>(o.beta1), static_cast<float>(o.beta2),
         static_cast<float>(o.eps), static_cast<float>(o.weight_decay), 1.0f, step},
        o.clip_grad, s, &norm);
    ++loss_steps;
    if (step % cfg.train.log_interval == 0 || step == steps) {
      log_info(ctx,
               absl::StrFormat("step %*d/%d | loss %.4f | lr %.3e | grad norm %.3f", width, step,
                               steps, loss_sum / static_cast<double>(loss_steps), lr, norm));
      loss_sum = 0.0;
      loss_steps = 0;
    }
    if (cfg.train.eval_interval > 0 && step % cfg.train.eval_interval == 0 && step != steps) {
      evaluate(step);
    }
  }
  evaluate(steps);
  if (!cfg.checkpoint.save.empty()) {
    ANVIL_RETURN_IF_ERROR(save(cfg, raw.dump(), *m, steps, s));
    log_info(ctx, absl::StrCat("saved ", io::checkpoint_step_dir(cfg.checkpoint.save, steps)));
  }
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  std::string config;
  std::vector<std::string> overrides;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (a.find('=') != std::string::npos) {
      overrides.push_back(a);
    } else if (config.empty() && a.rfind("-", 0) != 0) {
      config = a;
    } else {
      std::fprintf(stderr, "finetune: error: unexpected argument %s\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (config.empty()) {
    std::fprintf(stderr, "finetune: error: no config file given\n%s", kUsage);
    return 2;
  }
  const absl::Status s = run(config, overrides);
  if (!s.ok()) {
    std::fprintf(stderr, "finetune: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
