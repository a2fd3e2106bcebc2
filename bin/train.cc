// bin/train: trains a GPT from an ini config on one GPU or the CPU.
//   build/bin/train CONFIG.ini [section.key=value ...] [--dry-run]
//   build/bin/train --print-config-docs      (docs/config.md)
//   build/bin/train [CONFIG.ini] --print-device   ("cuda" or "cpu": what [train] device picks)
// Parses the config into structs (model/train_config), opens the data (io/), wires io's sample
// stream into the trainer's callbacks (model/ never reads data formats) and runs the loop.
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "engine/arena.h"
#include "engine/config.h"
#include "engine/device.h"
#include "engine/log.h"
#include "io/gpt_samples.h"
#include "io/indexed_dataset.h"
#include "model/train_config.h"
#include "model/trainer.h"

namespace {

using anvil::engine::format_bytes;
using anvil::engine::log_info;
using anvil::engine::log_warning;
namespace model = anvil::model;

constexpr char kUsage[] =
    "usage: train CONFIG.ini [section.key=value ...] [--dry-run]\n"
    "       train --print-config-docs\n"
    "       train [CONFIG.ini] --print-device\n"
    "  --dry-run            print the model size and memory plan, then exit\n"
    "  --print-config-docs  print the configuration reference (docs/config.md)\n"
    "  --print-device       print the device [train] device resolves to (cuda or cpu)\n";

int fail(const absl::Status& s) {
  std::fprintf(stderr, "train: error: %s\n", std::string(s.message()).c_str());
  return 1;
}

// "124.44M", "1.31B".
std::string count(double v) {
  if (v >= 1e9) return absl::StrFormat("%.2fB", v / 1e9);
  if (v >= 1e6) return absl::StrFormat("%.2fM", v / 1e6);
  if (v >= 1e3) return absl::StrFormat("%.1fK", v / 1e3);
  return absl::StrFormat("%.0f", v);
}

int run(int argc, char** argv) {
  std::optional<std::string> config_path;
  std::vector<std::string> overrides;
  bool dry_run = false, print_docs = false, print_device = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dry-run") {
      dry_run = true;
    } else if (a == "--print-config-docs") {
      print_docs = true;
    } else if (a == "--print-device") {
      print_device = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (absl::StartsWith(a, "-")) {
      std::fprintf(stderr, "train: error: unknown flag %s\n%s", a.c_str(), kUsage);
      return 2;
    } else if (absl::StrContains(a, '=')) {
      overrides.push_back(a);
    } else if (!config_path) {
      config_path = a;
    } else {
      std::fprintf(stderr,
                   "train: error: a second config file %s (overrides look like "
                   "section.key=value)\n%s",
                   a.c_str(), kUsage);
      return 2;
    }
  }
  if (print_docs) {
    std::fputs(model::config_docs_markdown().c_str(), stdout);
    return 0;
  }
  if (print_device && !config_path) {
    auto prec = model::resolve_precision("auto");
    if (!prec.ok()) return fail(prec.status());
    std::printf("%s\n", std::string(anvil::engine::device_name(prec->device)).c_str());
    return 0;
  }
  if (!config_path) {
    std::fprintf(stderr, "train: error: no config file given\n%s", kUsage);
    return 2;
  }

  anvil::engine::Config raw;
  absl::StatusOr<model::TrainConfig> loaded =
      model::load_train_config(*config_path, overrides, &raw);
  if (!loaded.ok()) return fail(loaded.status());
  const model::TrainConfig& cfg = *loaded;
  absl::StatusOr<model::GptPrecision> prec = model::resolve_precision(cfg.train.device);
  if (!prec.ok()) return fail(prec.status());
  if (print_device) {
    std::printf("%s\n", std::string(anvil::engine::device_name(prec->device)).c_str());
    return 0;
  }
  const anvil::engine::LogContext ctx{0, 1, cfg.log.all_ranks};
  const bool cuda = prec->device == anvil::engine::Device::kCuda;

  log_info(ctx, absl::StrFormat("config %s (effective values):\n%s", *config_path, raw.dump()));
  const model::GptConfig& m = cfg.model;
  const int64_t T = cfg.data.seq_len;
  const int64_t tokens_per_step = cfg.train.global_batch * T;
  log_info(ctx,
           absl::StrFormat(
               "model: GPT %d layers, d_model %d, %d heads, ffn %d, vocab %d (padded %d), "
               "seq_len %d: %s parameters (%s in matmuls), %s FLOP per token (fwd+bwd)",
               m.n_layers, m.d_model, m.n_heads, m.ffn(), m.vocab_size, m.padded(), T,
               count(static_cast<double>(m.total_params())),
               count(static_cast<double>(m.matmul_params())), count(model::flops_per_token(m, T))));
  log_info(ctx, absl::StrFormat(
                    "batch: micro_batch %d x %d accumulation steps = global_batch %d = %s tokens "
                    "per step; %d steps = %s tokens",
                    cfg.train.micro_batch, cfg.train.accumulation_steps(), cfg.train.global_batch,
                    count(static_cast<double>(tokens_per_step)), cfg.train.steps,
                    count(static_cast<double>(tokens_per_step * cfg.train.steps))));
  log_info(ctx, cuda ? "device: cuda:0 (bf16 parameters/activations, f32 master weights, "
                       "gradients and AdamW state)"
                     : "device: cpu (f32)");

  absl::StatusOr<anvil::engine::MemoryPlan> plan = model::Trainer::plan(cfg, *prec);
  if (!plan.ok()) return fail(plan.status());
  log_info(ctx, absl::StrFormat("memory plan (micro_batch %d, seq_len %d):\n%s",
                                cfg.train.micro_batch, T, plan->format()));
  if (cuda) {
    size_t free_bytes = 0, total_bytes = 0;
    anvil::engine::cuda_memory_info(&free_bytes, &total_bytes);
    log_info(ctx, absl::StrFormat("GPU memory: %s free of %s",
                                  format_bytes(static_cast<double>(free_bytes)),
                                  format_bytes(static_cast<double>(total_bytes))));
  }
  if (absl::Status s = model::Trainer::check_fits(*plan, *prec); !s.ok()) return fail(s);
  if (dry_run) return 0;

  // Data: train and validation sample streams over the document split.
  if (absl::Status s = model::check_data_files(cfg.data.path); !s.ok()) return fail(s);
  auto data = anvil::io::IndexedDataset::open(cfg.data.path);
  if (!data.ok()) return fail(data.status());
  auto ranges = anvil::io::split_documents(cfg.data.split, (*data)->num_documents());
  if (!ranges.ok()) return fail(ranges.status());
  auto train_stream = anvil::io::GptSampleStream::create(data->get(), (*ranges)[0].first,
                                                         (*ranges)[0].second, T, cfg.data.seed);
  if (!train_stream.ok()) {
    return fail(absl::FailedPreconditionError(
        absl::StrFormat("[data] train split (documents [%d, %d) of %s): %s", (*ranges)[0].first,
                        (*ranges)[0].second, cfg.data.path, train_stream.status().message())));
  }
  std::optional<anvil::io::GptSampleStream> valid_stream;
  if (cfg.train.eval_iters > 0) {
    auto v = anvil::io::GptSampleStream::create(data->get(), (*ranges)[1].first,
                                                (*ranges)[1].second, T, cfg.data.seed);
    if (v.ok()) {
      valid_stream.emplace(std::move(*v));
    } else {
      log_warning(ctx,
                  absl::StrFormat("no evaluation: validation split (documents [%d, %d)): %s",
                                  (*ranges)[1].first, (*ranges)[1].second, v.status().message()));
    }
  }
  const double epochs = static_cast<double>(tokens_per_step / T * cfg.train.steps) /
                        static_cast<double>(train_stream->samples_per_epoch());
  log_info(ctx, absl::StrFormat(
                    "data: %s: %d documents, %s tokens; train documents [%d, %d): %d samples per "
                    "epoch (%.2f epochs); validation: %s",
                    cfg.data.path, (*data)->num_documents(),
                    count(static_cast<double>((*data)->total_tokens())), (*ranges)[0].first,
                    (*ranges)[0].second, train_stream->samples_per_epoch(), epochs,
                    valid_stream ? absl::StrFormat("%d samples, %d per evaluation",
                                                   valid_stream->samples_per_epoch(),
                                                   cfg.train.eval_iters * cfg.train.micro_batch)
                                 : std::string("none")));

  const anvil::io::GptSampleStream& ts = *train_stream;
  model::SampleFn train_fn = [&ts](int64_t i, int32_t* out) { ts.sample(i, out); };
  model::SampleFn valid_fn;
  if (valid_stream) {
    const anvil::io::GptSampleStream& vs = *valid_stream;
    valid_fn = [&vs](int64_t i, int32_t* out) { vs.sample(i, out); };
  }
  auto trainer = model::Trainer::create(cfg, *prec, train_fn, valid_fn, ctx);
  if (!trainer.ok()) return fail(trainer.status());
  (*trainer)->run();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
