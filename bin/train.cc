// bin/train: trains a GPT (BERT, T5) from an ini config on one GPU or the CPU, or on many ranks.
//   build/bin/train CONFIG.ini [section.key=value ...] [--dry-run]
//   build/bin/train --print-config-docs      (docs/config.md)
//   build/bin/train [CONFIG.ini] --print-device   ("cuda" or "cpu": what [train] device picks)
//   mpirun -np 4 build/bin/train CONFIG.ini ...   srun -n 16 build/bin/train CONFIG.ini ...
// Many ranks (docs/parallelism.md): the launcher's variables give rank, world and local rank
// (parallel/launch_env); MPI is initialized only under a launcher; each rank uses CUDA device
// local_rank % device count.
// Parses the config into structs (model/train_config), opens the data (io/), wires io's sample
// datasets into the trainer's callbacks (model/ never reads data formats) and runs the loop.
// Checkpoints ([checkpoint], docs/checkpoints.md): model/checkpoint turns the model's state
// into logical tensor boxes and back, io/checkpoint writes and verifies the files; here they
// meet, with the barriers between the ranks' phases. SIGTERM / SIGUSR1 / a first Ctrl-C only set
// a flag: the loop finishes its step, every rank agrees to stop (max over the world), saves, and
// exits 0; a second Ctrl-C exits at once with status 130 (engine/stop_signals).
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bin/data_streams.h"
#include "bin/dry_run_plan.h"
#include "bin/train_t5.h"
#include "engine/arena.h"
#include "engine/config.h"
#include "engine/device.h"
#include "engine/log.h"
#include "engine/status.h"
#include "engine/stop_signals.h"
#include "io/blended_dataset.h"
#include "io/checkpoint.h"
#include "io/checkpoint_cleanup.h"
#include "io/eval_text.h"
#include "io/gpt_dataset.h"
#include "io/indexed_dataset.h"
#include "io/tensorboard_writer.h"
#include "io/tokenizer.h"
#include "model/checkpoint.h"
#include "model/eval_suite.h"
#include "model/t5_checkpoint.h"
#include "model/t5_train.h"
#include "model/train_config.h"
#include "model/trainer.h"
#include "parallel/comm.h"
#include "parallel/launch_env.h"
#include "parallel/runtime.h"

extern char** environ;  // read here only: libraries never read the environment

namespace {

using anvil::engine::format_bytes;
using anvil::engine::log_info;
using anvil::engine::log_warning;
namespace model = anvil::model;
using anvil::bin::count;
using anvil::bin::DataStreams;
using anvil::bin::open_bert_data;
using anvil::bin::open_gpt_data;

constexpr char kUsage[] =
    "usage: train CONFIG.ini [section.key=value ...] [--dry-run]\n"
    "       train --print-config-docs\n"
    "       train [CONFIG.ini] --print-device\n"
    "  --dry-run            print the model size and memory plan, then exit\n"
    "  --device-memory M    with --dry-run: plan against M bytes of device memory (80GiB,\n"
    "                       141GB, h100, h200) and exit 1 when the plan does not fit; a CUDA\n"
    "                       run without a visible GPU plans for an h100 unless M is given\n"
    "  --print-config-docs  print the configuration reference (docs/config.md)\n"
    "  --print-device       print the device [train] device resolves to (cuda or cpu)\n"
    "  --local_rank=N       ignored (the deepspeed launcher's; LOCAL_RANK is read instead)\n";

// This process's rank and the world size, for error lines (set once the launcher is known).
// Errors before MPI starts (flags, config) are the same on every rank: only rank 0 prints them.
int g_rank = 0, g_world = 1;
bool g_rank_local_errors = false;

int fail(const absl::Status& s) {
  if (g_rank != 0 && !g_rank_local_errors) return 1;
  if (g_world > 1) {
    std::fprintf(stderr, "train: error (rank %d of %d): %s\n", g_rank, g_world,
                 std::string(s.message()).c_str());
  } else {
    std::fprintf(stderr, "train: error: %s\n", std::string(s.message()).c_str());
  }
  return 1;
}

// The world's element-wise max of `v` (every rank must call it; v itself on one rank).
template <size_t N>
std::array<double, N> world_max(anvil::parallel::Comm* world, std::array<double, N> v) {
  if (world == nullptr) return v;
  anvil::engine::Stream s = anvil::engine::Stream::cpu();
  world->all_reduce(
      anvil::engine::make_view(v.data(), anvil::engine::DType::kF64, anvil::engine::Device::kCpu,
                               {static_cast<int64_t>(N)}),
      anvil::parallel::ReduceOp::kMax, s);
  return v;
}

// The bytes the ranks on this process's host plan together, and how many they are: each rank
// puts (host id, its plan's bytes) into its own slot of a world sum (collective).
std::pair<size_t, int> host_plan_bytes(anvil::parallel::Comm& world, int rank, int world_size,
                                       size_t plan_bytes) {
  std::array<char, 256> name{};
  ::gethostname(name.data(), name.size() - 1);
  // A host id exact in a double.
  const double host =
      static_cast<double>(std::hash<std::string>{}(name.data()) % (uint64_t{1} << 52));
  std::vector<double> slots(2 * static_cast<size_t>(world_size), 0.0);
  slots[2 * rank] = host;
  slots[2 * rank + 1] = static_cast<double>(plan_bytes);
  anvil::engine::Stream s = anvil::engine::Stream::cpu();
  world.all_reduce(
      anvil::engine::make_view(slots.data(), anvil::engine::DType::kF64,
                               anvil::engine::Device::kCpu, {static_cast<int64_t>(slots.size())}),
      anvil::parallel::ReduceOp::kSum, s);
  double bytes = 0.0;
  int ranks = 0;
  for (int r = 0; r < world_size; ++r) {
    if (slots[2 * r] != host) continue;
    bytes += slots[2 * r + 1];
    ++ranks;
  }
  return {static_cast<size_t>(std::min(bytes, 0x1p63)), ranks};
}

// [model] vocab_size and [data] eod_token from the [tokenizer] of the unparsed config (overrides
// for the keys the config leaves at their defaults, adopted before the model keys that depend on
// them, such as padded_vocab, are validated); InvalidArgument when an explicit value disagrees.
absl::StatusOr<std::vector<std::string>> tokenizer_overrides(const anvil::engine::Config& raw) {
  const std::string type = raw.get_string("tokenizer", "type");
  const std::string vocab = raw.get_string("tokenizer", "vocab_file");
  ANVIL_ASSIGN_OR_RETURN(
      std::unique_ptr<anvil::io::Tokenizer> tok,
      anvil::io::make_tokenizer({type, vocab, raw.get_string("tokenizer", "merge_file"),
                                 static_cast<int>(raw.get_int("tokenizer", "vocab_extra_ids"))}));
  std::vector<std::string> out;
  auto adopt = [&](const char* section, const char* key, int64_t want) -> absl::Status {
    if (raw.origin(section, key) == "default") {
      out.push_back(absl::StrCat(section, ".", key, "=", want));
      return absl::OkStatus();
    }
    const int64_t have = raw.get_int(section, key);
    if (have == want) return absl::OkStatus();
    return raw.error(section, key,
                     absl::StrFormat("%d differs from the tokenizer's %d ([tokenizer] %s %s)", have,
                                     want, type, vocab));
  };
  ANVIL_RETURN_IF_ERROR(adopt("model", "vocab_size", tok->vocab_size()));
  if (tok->special().eod >= 0) {
    ANVIL_RETURN_IF_ERROR(adopt("data", "eod_token", tok->special().eod));
  }
  return out;
}

// The tokenizer's files, kept with every checkpoint as tokenizer/<file name>.
std::map<std::string, std::string> tokenizer_attachments(const model::TokenizerConfig& t) {
  std::map<std::string, std::string> out;
  for (std::string path : {t.vocab_file, t.merge_file}) {
    if (path.empty()) continue;
    if (std::filesystem::is_directory(path)) path += "/tokenizer.json";  // HF: a directory
    out[absl::StrCat("tokenizer/", std::filesystem::path(path).filename().string())] = path;
  }
  return out;
}

// The model's checkpoint boxes (model/checkpoint.h, model/t5_checkpoint.h) and their load.
std::vector<anvil::engine::HostSlice> model_slices(model::Trainer& t, int dp_rank) {
  return model::gpt_checkpoint_slices(t.model(), dp_rank, t.stream());
}
std::vector<anvil::engine::HostSlice> model_slices(model::T5Trainer& t, int dp_rank) {
  return model::t5_checkpoint_slices(t.model(), dp_rank, t.stream());
}
absl::Status load_model_state(model::Trainer& t, const model::TensorLookup& lookup,
                              bool weights_only) {
  return model::gpt_load_checkpoint(t.model(), lookup, weights_only, t.stream());
}
absl::Status load_model_state(model::T5Trainer& t, const model::TensorLookup& lookup,
                              bool weights_only) {
  return model::t5_load_checkpoint(t.model(), lookup, weights_only, t.stream());
}

// Saves the trainer's state into cfg.checkpoint.save: rank 0 creates the temporary directory,
// every rank writes its boxes, rank 0 writes the manifest and commits (barriers between), then
// removes the temporary directories of earlier interrupted saves.
template <typename TrainerT>
absl::Status save_checkpoint(const model::TrainConfig& cfg, const std::string& config_text,
                             TrainerT& trainer, const anvil::parallel::ProcessGrid& grid,
                             anvil::parallel::Comm* world, const anvil::engine::LogContext& ctx) {
  anvil::engine::Stream cpu = anvil::engine::Stream::cpu();
  auto barrier = [&] {
    if (world != nullptr) world->barrier(cpu);
  };
  // The temporary directory's token: rank 0's pid, the same on every rank.
  double token = static_cast<double>(::getpid());
  if (world != nullptr) {
    world->broadcast(anvil::engine::make_view(&token, anvil::engine::DType::kF64,
                                              anvil::engine::Device::kCpu, {1}),
                     0, cpu);
  }
  const std::string tok = absl::StrCat(static_cast<int64_t>(token));
  const std::string& dir = cfg.checkpoint.save;
  const int64_t step = trainer.steps_done();
  if (grid.rank() == 0) ANVIL_RETURN_IF_ERROR(anvil::io::begin_checkpoint(dir, step, tok));
  barrier();
  const std::string tmp = anvil::io::checkpoint_tmp_dir(dir, step, tok);
  ANVIL_RETURN_IF_ERROR(
      anvil::io::write_checkpoint_shard(tmp, grid.rank(), model_slices(trainer, grid.dp_rank())));
  barrier();
  if (grid.rank() == 0) {
    anvil::io::CheckpointInfo info;
    info.step = step;
    info.config = config_text;
    info.model = model::checkpoint_model_record(cfg);
    info.state = model::checkpoint_counters(trainer.state(), cfg);
    info.layout = model::checkpoint_layout(cfg);
    info.lr_schedule = model::checkpoint_lr_schedule(cfg, trainer.state());
    info.grad_scaler = model::loss_scaler_map(trainer.state().loss_scaler);
    info.attachments = tokenizer_attachments(cfg.tokenizer);
    ANVIL_RETURN_IF_ERROR(
        anvil::io::finish_checkpoint(dir, tmp, grid.world(), info, cfg.checkpoint.keep_last));
    ANVIL_ASSIGN_OR_RETURN(std::vector<std::string> stale,
                           anvil::io::remove_stale_checkpoint_temps(dir, tok));
    for (const std::string& path : stale) {
      log_info(ctx, absl::StrCat("removed ", path, ", the leftover of an interrupted save"));
    }
  }
  barrier();
  return absl::OkStatus();
}

// Loads [checkpoint] load into the trainer (weights only with finetune). A directory without
// any checkpoint starts from scratch with a warning.
template <typename TrainerT>
absl::Status load_checkpoint(const model::TrainConfig& cfg, TrainerT& trainer,
                             const anvil::engine::LogContext& ctx) {
  const model::CheckpointConfig& k = cfg.checkpoint;
  absl::StatusOr<anvil::io::Checkpoint> c = anvil::io::open_newest_complete(
      k.load, k.load_step, [&](const std::string& w) { log_warning(ctx, w); });
  if (absl::IsNotFound(c.status())) {
    log_warning(ctx, absl::StrCat(c.status().message(), ": starting from scratch"));
    return absl::OkStatus();
  }
  ANVIL_RETURN_IF_ERROR(c.status());
  ANVIL_RETURN_IF_ERROR(model::check_checkpoint_model(c->info().model, cfg, c->dir()));
  if (!k.finetune) {
    const std::vector<std::string> names = c->tensor_names();
    if (std::none_of(names.begin(), names.end(), [](const std::string& n) {
          return absl::StartsWith(n, model::kExpAvgState);
        })) {
      return absl::InvalidArgumentError(
          absl::StrCat(c->dir(),
                       " holds weights only (an import?): load it with [checkpoint] "
                       "finetune = true"));
    }
  }
  ANVIL_RETURN_IF_ERROR(load_model_state(
      trainer, [&](const std::string& name) { return c->read(name); }, k.finetune));
  std::string layout;
  for (const auto& [key, v] : c->info().layout) {
    absl::StrAppend(&layout, layout.empty() ? "; saved with " : ", ", key, " ", v);
  }
  if (k.finetune) {
    log_info(ctx,
             absl::StrCat("finetune: weights of ", c->dir(), layout, "; fresh optimizer, step 0"));
    return absl::OkStatus();
  }
  ANVIL_ASSIGN_OR_RETURN(model::TrainerState st, model::trainer_state_from(c->info().state, cfg));
  ANVIL_ASSIGN_OR_RETURN(st.loss_scaler, model::loss_scaler_from_map(c->info().grad_scaler));
  trainer.restore(st);
  const int64_t samples = cfg.train.run_samples();
  auto saved = c->info().state.find("train_samples");
  if (saved != c->info().state.end() && saved->second != samples) {
    log_warning(
        ctx, absl::StrFormat("the checkpoint's run had %d training samples ([train] train_samples "
                             "or steps x global_batch), this one has %d: the sample order (a "
                             "shuffle over the "
                             "whole run) differs from the one the checkpoint was trained on",
                             saved->second, samples));
  }
  log_info(ctx, absl::StrFormat("resuming from %s: step %d, %d samples consumed%s", c->dir(),
                                st.step, st.consumed_samples, layout));
  return absl::OkStatus();
}

// The trainer's scalars into the TensorBoard file. A failed write warns once, naming the file,
// and ends the file's scalars, not the run.
model::MetricsSink tensorboard_sink(anvil::io::TensorBoardWriter& w,
                                    const anvil::engine::LogContext& ctx) {
  auto failed = std::make_shared<bool>(false);
  model::MetricsSink sink;
  sink.scalar = [&w, failed](std::string_view tag, double v, int64_t x) {
    if (!*failed) w.add_scalar(tag, v, x);
  };
  sink.flush = [&w, failed, ctx] {
    if (*failed) return;
    if (absl::Status s = w.flush(); !s.ok()) {
      *failed = true;
      log_warning(ctx, absl::StrCat(s.message(), ": no further TensorBoard events are written"));
    }
  };
  return sink;
}

// The [eval] tasks, read and tokenized with the run's [tokenizer] (io/eval_text).
absl::StatusOr<model::EvalSuite> load_eval_suite(const model::TrainConfig& cfg) {
  const model::EvalConfig& e = cfg.eval;
  const model::TokenizerConfig& t = cfg.tokenizer;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<anvil::io::Tokenizer> tok,
                         anvil::io::make_tokenizer({t.type, t.vocab_file, t.merge_file}));
  model::EvalSuite suite;
  suite.pad = static_cast<int32_t>(cfg.data.eod_token);
  suite.text_stride = e.text_stride;
  if (!e.text.empty()) {
    ANVIL_ASSIGN_OR_RETURN(anvil::io::Detokenizer d,
                           anvil::io::parse_detokenizer(e.text_detokenizer));
    ANVIL_ASSIGN_OR_RETURN(anvil::io::EvalText text, anvil::io::load_eval_text(e.text, *tok, d));
    suite.text_name = e.text;
    suite.text_tokens = std::move(text.tokens);
    suite.text_words = text.words;
  }
  if (!e.lambada.empty()) {
    ANVIL_ASSIGN_OR_RETURN(std::vector<anvil::io::LambadaExample> ex,
                           anvil::io::load_lambada(e.lambada, *tok, e.strict_lambada));
    suite.lambada_name = e.lambada;
    for (anvil::io::LambadaExample& x : ex) {
      suite.lambada.push_back({std::move(x.context), std::move(x.target)});
    }
  }
  return suite;
}

// Loads [checkpoint] load, runs `tr` to the end saving every save_interval steps and when a
// stop (signal, exit_interval, exit_duration_min) ends it, then saves the final state; bin/train's
// exit status (fatal: a rank-local error that ends every rank).
template <typename TrainerT, typename Fatal>
int train_loop(const model::TrainConfig& cfg, const std::string& config_text, TrainerT& tr,
               const anvil::parallel::ProcessGrid& grid, anvil::parallel::Comm* world,
               const anvil::engine::LogContext& ctx, const anvil::engine::Timer& started,
               const Fatal& fatal) {
  const model::CheckpointConfig& ck = cfg.checkpoint;
  if (!ck.load.empty()) {
    if (absl::Status s = load_checkpoint(cfg, tr, ctx); !s.ok()) return fatal(s);
  }
  int64_t saved_step = ck.load.empty() ? -1 : tr.steps_done();
  absl::Status save_status;
  auto save = [&] {
    save_status = save_checkpoint(cfg, config_text, tr, grid, world, ctx);
    if (save_status.ok()) {
      saved_step = tr.steps_done();
      log_info(ctx,
               absl::StrFormat("saved checkpoint %s at step %d",
                               anvil::io::checkpoint_step_dir(ck.save, saved_step), saved_step));
    }
    return save_status.ok();
  };
  tr.set_step_hook([&](const model::StepStats& st) {
    // From here a signal stops the run after the next step (and its message says so); one that
    // came while step st.step was in flight stops it now. Announcing first, then reading, leaves
    // no moment where the message and the stop disagree.
    anvil::engine::set_step_in_flight(st.step + 1);
    // Every rank must stop at the same step: the reasons are agreed on over the world.
    const std::array<double, 2> why_stop = world_max<2>(
        world,
        {static_cast<double>(anvil::engine::stop_signal_due(st.step)),
         ck.exit_duration_min > 0 && started.seconds() >= 60 * ck.exit_duration_min ? 1.0 : 0.0});
    const int sig = static_cast<int>(why_stop[0]);
    const bool out_of_time = why_stop[1] > 0;
    const bool at_exit_interval = ck.exit_interval > 0 && st.step % ck.exit_interval == 0;
    const bool stop = sig > 0 || out_of_time || at_exit_interval;
    const bool periodic = ck.save_interval > 0 && st.step % ck.save_interval == 0;
    if (!ck.save.empty() && (stop || periodic) && !save()) return true;
    if (stop) {
      const std::string why =
          sig > 0 ? absl::StrCat("received ", anvil::engine::stop_signal_name(sig))
          : out_of_time
              ? absl::StrFormat("[checkpoint] exit_duration_min %g reached", ck.exit_duration_min)
              : absl::StrFormat("[checkpoint] exit_interval %d reached", ck.exit_interval);
      log_info(ctx,
               absl::StrFormat("%s: stopping after step %d%s", why, st.step,
                               ck.save.empty() ? " (no [checkpoint] save: nothing saved)" : ""));
    }
    return stop;
  });
  anvil::engine::set_step_in_flight(tr.steps_done() + 1);
  const model::TrainSummary summary = tr.run();
  anvil::engine::set_step_in_flight(tr.steps_done());  // the final save's step
  if (!save_status.ok()) return fatal(save_status);
  // A diverged run ends without a final save: the newest checkpoint stays the last good one.
  // The gradient norm is the global batch's on every rank, so all ranks stop here together:
  // rank 0 reports, and each exits 1 without aborting the job.
  if (!summary.status.ok()) {
    g_rank_local_errors = false;
    return fail(summary.status);
  }
  if (!ck.save.empty() && saved_step != tr.steps_done() && !save()) return fatal(save_status);
  return 0;
}

int run(int argc, char** argv) {
  // From here on a stop signal only sets a flag: the training loop saves and ends the run.
  // exit_duration_min counts from here.
  anvil::engine::install_stop_signals();
  const anvil::engine::Timer started;
  std::optional<std::string> config_path;
  std::vector<std::string> overrides;
  bool dry_run = false, print_docs = false, print_device = false;
  anvil::bin::DeviceMemory stated;  // --device-memory
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--dry-run") {
      dry_run = true;
    } else if (a == "--device-memory" || absl::StartsWith(a, "--device-memory=")) {
      if (a == "--device-memory" && i + 1 == argc) {
        std::fprintf(stderr, "train: error: --device-memory needs a value\n%s", kUsage);
        return 2;
      }
      absl::StatusOr<anvil::bin::DeviceMemory> m =
          anvil::bin::parse_device_memory(a == "--device-memory" ? argv[++i] : a.substr(16));
      if (!m.ok()) {
        std::fprintf(stderr, "train: error: %s\n", std::string(m.status().message()).c_str());
        return 2;
      }
      stated = *m;
    } else if (a == "--print-config-docs") {
      print_docs = true;
    } else if (a == "--print-device") {
      print_device = true;
    } else if (absl::StartsWith(a, "--local_rank=") || a == "--local_rank") {
      // The deepspeed launcher appends it; the same value is in LOCAL_RANK (launch_env.h).
      if (a == "--local_rank") ++i;
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
  if (stated.bytes > 0 && !dry_run) {
    std::fprintf(stderr, "train: error: --device-memory plans a dry run: add --dry-run\n");
    return 2;
  }

  // Rank discovery (mpirun, srun, Hydra, torchrun / deepspeed, or none: one rank).
  absl::StatusOr<anvil::parallel::LaunchInfo> launch =
      anvil::parallel::launch_info_from_env(anvil::parallel::env_map(environ));
  if (!launch.ok()) return fail(launch.status());
  g_rank = launch->rank;
  g_world = launch->world;
  anvil::engine::set_process_rank(launch->rank);

  // The tokenizer's vocabulary and EOD first (as overrides), then the whole config parsed.
  absl::StatusOr<anvil::engine::Config> unparsed =
      anvil::engine::Config::load_file(*config_path, model::train_config_schema(), overrides);
  if (!unparsed.ok()) return fail(unparsed.status());
  std::vector<std::string> all = overrides;
  if (!unparsed->get_string("tokenizer", "type").empty()) {
    absl::StatusOr<std::vector<std::string>> more = tokenizer_overrides(*unparsed);
    if (!more.ok()) {
      // A [tokenizer] error the parser words better (a missing vocab_file) comes first.
      absl::Status parsed =
          model::load_train_config(*config_path, overrides, nullptr, launch->world).status();
      return fail(parsed.ok() ? more.status() : parsed);
    }
    all.insert(all.end(), more->begin(), more->end());
  }
  anvil::engine::Config raw;
  absl::StatusOr<model::TrainConfig> loaded =
      model::load_train_config(*config_path, all, &raw, launch->world);
  if (!loaded.ok()) return fail(loaded.status());
  const model::TrainConfig& cfg = *loaded;
  anvil::engine::set_interrupt_message(launch->rank == 0, !cfg.checkpoint.save.empty());
  // A dry run of a CUDA job where no GPU is visible (a login node) plans for the stated GPU.
  const bool absent_gpu =
      dry_run && cfg.train.device == "cuda" && anvil::engine::cuda_device_count() == 0;
  absl::StatusOr<model::GptPrecision> prec =
      absent_gpu ? anvil::bin::planned_cuda_precision(cfg.train.precision.mode)
                 : model::resolve_precision(cfg.train.device, cfg.train.precision.mode);
  if (!prec.ok()) return fail(prec.status());
  if (absent_gpu && stated.bytes == 0) stated = anvil::bin::default_device_memory();
  if (print_device) {
    std::printf("%s\n", std::string(anvil::engine::device_name(prec->device)).c_str());
    return 0;
  }
  const anvil::engine::LogContext ctx{launch->rank, launch->world, cfg.log.all_ranks};
  const bool cuda = prec->device == anvil::engine::Device::kCuda;
  const int cuda_device =
      cuda && !absent_gpu ? launch->local_rank % anvil::engine::cuda_device_count() : 0;

  // MPI or the TCP store (under a launcher), the process grid and its groups' CPU communicators.
  // Errors so far were the same on every rank; from here on a rank-local failure ends all ranks.
  anvil::parallel::CommOptions comm_options;
  comm_options.timeout_s = cfg.parallel.timeout_s;
  auto rt = anvil::parallel::ParallelRuntime::start(*launch, cfg.parallel.tp, cfg.parallel.pp,
                                                    cfg.parallel.dp, comm_options);
  if (!rt.ok()) return fail(rt.status());
  g_rank_local_errors = true;
  auto fatal = [&](const absl::Status& st) {
    if (launch->world > 1) {
      (*rt)->abort(absl::StrCat("train: error: ", std::string(st.message())));
    }
    return fail(st);
  };

  log_info(ctx, absl::StrFormat("config %s (effective values):\n%s", *config_path, raw.dump()));
  // --dry-run against a stated device memory: 0 when the plan fits, 1 when it does not.
  auto report_stated = [&](const anvil::engine::MemoryPlan& plan) {
    std::string line;
    if (absl::Status s = anvil::bin::check_stated_fit(plan, stated, &line); !s.ok()) {
      return fatal(s);
    }
    log_info(ctx, line);
    return 0;
  };
  if (cfg.model.t5()) {  // the encoder-decoder's own trainer
    const model::TrainerParallel t5_par{&(*rt)->grid(), &(*rt)->comms(), (*rt)->store(),
                                        launch->local_rank};
    if (stated.bytes > 0) {  // the plan printed, then compared with the stated memory
      model::TrainConfig unchecked = cfg;
      unchecked.train.check_memory = false;
      absl::StatusOr<std::unique_ptr<model::T5Trainer>> none =
          anvil::train_t5::make_t5_trainer(unchecked, *prec, ctx, /*dry_run=*/true, t5_par);
      if (!none.ok()) return fatal(none.status());
      absl::StatusOr<model::T5Shard> shard = model::T5Trainer::stage_shard(cfg, t5_par.grid);
      if (!shard.ok()) return fatal(shard.status());
      absl::StatusOr<anvil::engine::MemoryPlan> plan = model::T5Trainer::plan(cfg, *prec, *shard);
      if (!plan.ok()) return fatal(plan.status());
      return report_stated(*plan);
    }
    absl::StatusOr<std::unique_ptr<model::T5Trainer>> t5 =
        anvil::train_t5::make_t5_trainer(cfg, *prec, ctx, dry_run, t5_par);
    if (!t5.ok()) return fatal(t5.status());
    if (*t5 == nullptr) return 0;  // --dry-run
    return train_loop(cfg, raw.dump(), **t5, (*rt)->grid(), (*rt)->comms().world.get(), ctx,
                      started, fatal);
  }
  const model::GptConfig& m = cfg.model;
  const int64_t T = cfg.data.seq_len;
  const int64_t tokens_per_step = cfg.train.global_batch * T;
  log_info(ctx,
           absl::StrFormat(
               "model: %s %d layers, d_model %d, %d heads, ffn %d, vocab %d (padded %d), "
               "seq_len %d: %s parameters (%s in matmuls), %s FLOP per token (fwd+bwd)",
               m.bert() ? "BERT" : "GPT", m.n_layers, m.d_model, m.n_heads, m.ffn(), m.vocab_size,
               m.padded(), T, count(static_cast<double>(m.total_params())),
               count(static_cast<double>(m.matmul_params())), count(model::flops_per_token(m, T))));
  log_info(
      ctx,
      absl::StrFormat(
          "batch: micro_batch %d x %d accumulation steps x dp %d = global_batch %d = %s "
          "tokens per step; %d steps = %s tokens",
          cfg.train.micro_batch, cfg.train.accumulation_steps(cfg.parallel.dp), cfg.parallel.dp,
          cfg.train.global_batch, count(static_cast<double>(tokens_per_step)), cfg.train.steps,
          count(static_cast<double>(tokens_per_step) * static_cast<double>(cfg.train.steps))));
  const std::string precision = model::describe_precision(
      prec->act, model::loss_scaler_config(cfg.train.precision, prec->act));
  log_info(ctx, absl::StrCat(cuda ? absl::StrFormat("device: cuda:%d (%s)", cuda_device, precision)
                                  : absl::StrCat("device: cpu (", precision, ")"),
                             "; parallel: ", (*rt)->grid().describe(), ", launcher ",
                             launch->launcher, ", ZeRO stage ", cfg.parallel.zero_stage));

  const anvil::parallel::ProcessGrid& grid = (*rt)->grid();
  absl::StatusOr<model::GptShard> shard =
      model::Trainer::shard_for(cfg, grid.tp_rank(), grid.pp_rank(), grid.dp_rank());
  if (!shard.ok()) return fatal(shard.status());
  absl::StatusOr<anvil::engine::MemoryPlan> plan = model::Trainer::plan(cfg, *prec, *shard);
  if (!plan.ok()) return fatal(plan.status());
  log_info(ctx, absl::StrFormat("memory plan of this rank (micro_batch %d, seq_len %d, tp rank %d "
                                "of %d, pipeline stage %d of %d, %d activation slot(s)):\n%s",
                                cfg.train.micro_batch, T, grid.tp_rank(), grid.tp_size(),
                                grid.pp_rank(), grid.pp_size(), shard->act_slots, plan->format()));
  if (stated.bytes > 0) return report_stated(*plan);
  if (cuda) {
    size_t free_bytes = 0, total_bytes = 0;
    anvil::engine::cuda_memory_info(&free_bytes, &total_bytes);
    log_info(ctx, absl::StrFormat("GPU memory: %s free of %s",
                                  format_bytes(static_cast<double>(free_bytes)),
                                  format_bytes(static_cast<double>(total_bytes))));
  }
  std::optional<size_t> available;
  if (!cuda) {
    available = anvil::engine::host_memory_available();
    log_info(ctx, absl::StrFormat("host memory: %s available",
                                  available ? format_bytes(static_cast<double>(*available))
                                            : std::string("unknown (no /proc/meminfo)")));
  }
  if (cfg.train.check_memory) {
    if (absl::Status s = model::Trainer::check_fits(*plan, *prec); !s.ok()) return fatal(s);
    if (!cuda && launch->world > 1 && (*rt)->comms().world) {
      // Each rank's plan fits, but the CPU ranks of one host share its memory. (Every rank
      // joins the collective, with or without a MemAvailable of its own.)
      const auto [bytes, ranks] =
          host_plan_bytes(*(*rt)->comms().world, launch->rank, launch->world, plan->total_bytes());
      log_info(ctx, absl::StrFormat("the %d ranks on this host plan %s together", ranks,
                                    format_bytes(static_cast<double>(bytes))));
      if (available) {
        if (absl::Status s = model::check_host_plans_fit(bytes, ranks, *available); !s.ok()) {
          return fatal(s);
        }
      }
    }
  }
  if (dry_run) return 0;
  // TensorBoard events from the last rank, as Megatron (every rank has the step's loss and
  // norm); opened before the data so that an unusable directory fails at once.
  std::unique_ptr<anvil::io::TensorBoardWriter> tensorboard;
  if (!cfg.log.tensorboard_dir.empty()) {
    log_info(ctx, absl::StrFormat("TensorBoard events: %s/events.out.tfevents.* (rank %d)",
                                  cfg.log.tensorboard_dir, launch->world - 1));
  }
  if (!cfg.log.tensorboard_dir.empty() && launch->rank == launch->world - 1) {
    auto w = anvil::io::TensorBoardWriter::open(cfg.log.tensorboard_dir);
    if (!w.ok()) {
      return fatal(absl::Status(w.status().code(),
                                absl::StrCat("[log] tensorboard_dir: ", w.status().message())));
    }
    tensorboard = std::move(*w);
  }

  // Data: Megatron's GPT datasets over the split (io/gpt_dataset, io/blended_dataset), with
  // Megatron's sample counts; the index caches are built here by every process that lacks them.
  std::array<int64_t, 3> want = anvil::io::megatron_split_samples(
      cfg.train.steps, cfg.train.global_batch, cfg.train.eval_interval, cfg.train.eval_iters);
  want[0] = cfg.train.run_samples();  // Megatron: --train-samples when given
  DataStreams data;                   // (the samples' owners live as long as the trainer)
  if (absl::Status s = cfg.model.bert() ? open_bert_data(cfg, want, ctx, &data)
                                        : open_gpt_data(cfg, want, ctx, &data);
      !s.ok()) {
    return fatal(s);
  }
  model::SampleFn train_fn = data.train;
  std::vector<model::HeldOutSet> valid_fns = data.valid, test_fns = data.test;
  model::TrainerParallel par;
  par.grid = &(*rt)->grid();
  par.comms = &(*rt)->comms();
  par.store = (*rt)->store();
  par.local_rank = launch->local_rank;
  auto trainer = model::Trainer::create(cfg, *prec, train_fn, nullptr, ctx, par);
  if (!trainer.ok()) return fatal(trainer.status());
  model::Trainer& tr = **trainer;
  tr.set_held_out_sets(std::move(valid_fns), std::move(test_fns));
  if (tensorboard) tr.set_metrics_sink(tensorboard_sink(*tensorboard, ctx));
  if (cfg.eval.any()) {
    absl::StatusOr<model::EvalSuite> suite = load_eval_suite(cfg);
    if (!suite.ok()) return fatal(suite.status());
    const model::EvalParallel ep =
        model::eval_parallel((*rt)->grid(), (*rt)->comms(), tr.pipeline_comm());
    tr.set_eval_hook([&, ep, suite = *std::move(suite)](int64_t step) {
      const absl::Status s = model::run_eval_suite(suite, tr.model(), {cfg.train.micro_batch, T},
                                                   ep, tr.stream(), ctx, step, cfg.train.steps);
      if (!s.ok()) log_warning(ctx, absl::StrCat("[eval]: ", s.message()));
    });
  }
  return train_loop(cfg, raw.dump(), tr, (*rt)->grid(), (*rt)->comms().world.get(), ctx, started,
                    fatal);
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
