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
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bin/data_streams.h"
#include "bin/dry_run_plan.h"
#include "bin/mtf_data.h"
#include "bin/t5_data.h"
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
#include "io/masked_lm.h"
#include "io/tensorboard_writer.h"
#include "io/tokenizer.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/tasks/eval_suite.h"
#include "model/train/checkpoint.h"
#include "model/train/family.h"
#include "model/train/run_loop.h"
#include "model/train/train_config.h"
#include "model/train/train_model.h"
#include "model/train/trainer.h"
#include "parallel/comm.h"
#include "parallel/launch_env.h"
#include "parallel/runtime.h"

extern char** environ;  // read here only: libraries never read the environment

namespace {

using anvil::engine::format_bytes;
using anvil::engine::log_info;
using anvil::engine::log_warning;
namespace io = anvil::io;
namespace model = anvil::model;
using anvil::bin::count;
using anvil::bin::DataStreams;
using anvil::bin::open_bert_data;
using anvil::bin::open_gpt_data;
using anvil::bin::open_t5_data;

constexpr char kUsage[] =
    "usage: train CONFIG.ini [section.key=value ...] [--dry-run]\n"
    "       train --print-config-docs\n"
    "       train [CONFIG.ini] --print-device\n"
    "  --dry-run            print the model size and memory plan, then exit\n"
    "  --world N            with --dry-run: plan an N-rank job from this one process (every\n"
    "                       pipeline stage's plan; the largest is compared with\n"
    "                       --device-memory), e.g. a cluster config on a login node\n"
    "  --device-memory M    with --dry-run: plan against M bytes of device memory (80GiB,\n"
    "                       141GB, h100, h200) and exit 1 when the plan does not fit; a CUDA\n"
    "                       run without a visible GPU plans for an h100 unless M is given\n"
    "  --print-config-docs  print the configuration reference (docs/config.md)\n"
    "  --print-device       print the device [train] device resolves to (cuda or cpu)\n"
    "  --local_rank=N       ignored (the deepspeed launcher's; LOCAL_RANK is read instead)\n";

// Prints an error line ("train: error: ...", on many ranks naming the rank) and returns bin/train's
// exit status 1. Errors before the runtime starts (flags, config) are the same on every rank:
// only rank 0 prints them; from the runtime on (rank_local) each rank prints its own.
struct ErrorPrinter {
  int rank = 0, world = 1;
  bool rank_local = false;

  int operator()(const absl::Status& s) const {
    if (rank != 0 && !rank_local) return 1;
    if (world > 1) {
      std::fprintf(stderr, "train: error (rank %d of %d): %s\n", rank, world,
                   std::string(s.message()).c_str());
    } else {
      std::fprintf(stderr, "train: error: %s\n", std::string(s.message()).c_str());
    }
    return 1;
  }
};

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

// The grid coordinates of this rank, where the trainer's family plans its model.
model::ModelPlace place_of(const anvil::parallel::ProcessGrid& grid) {
  model::ModelPlace at;
  at.tp_rank = grid.tp_rank();
  at.pp_rank = grid.pp_rank();
  at.dp_rank = grid.dp_rank();
  return at;
}

// The run's samples in the family's record layout (model/train/family.h): Megatron's GPT, BERT
// or T5 datasets over the [data] split.
absl::Status open_data(const model::Family& family, const model::TrainConfig& cfg,
                       const std::array<int64_t, 3>& want, const anvil::engine::LogContext& ctx,
                       DataStreams* data) {
  switch (family.samples) {
    case model::SampleLayout::kBertPair:
      return open_bert_data(cfg, want, ctx, data);
    case model::SampleLayout::kT5Spans:
      return open_t5_data(cfg, ctx, data);
    case model::SampleLayout::kTokens:
      break;
  }
  // Packed T0/MTF rows (bin/mtf_data.h) or Megatron's GPT samples.
  return cfg.data.mtf ? anvil::bin::open_mtf_data(cfg, want, ctx, data)
                      : open_gpt_data(cfg, want, ctx, data);
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
    if (std::filesystem::is_directory(path)) {  // HF: a directory; its chat template too
      if (std::filesystem::exists(path + "/tokenizer_config.json")) {
        out["tokenizer/tokenizer_config.json"] = path + "/tokenizer_config.json";
      }
      path += "/tokenizer.json";
    }
    out[absl::StrCat("tokenizer/", std::filesystem::path(path).filename().string())] = path;
  }
  return out;
}

// The checkpoint [checkpoint] load names, opened and verified (every shard's CRC) once per
// process: the training split is sized from its counters before the data opens
// (train_samples_needed) and the load reads its tensors. The open's warnings are kept for the
// load's log.
class ResumeCheckpoint {
 public:
  explicit ResumeCheckpoint(const model::CheckpointConfig& ck)
      : dir_(ck.load), step_(ck.load_step) {}

  // The first call opens (io::open_newest_complete); every call reports the open's warnings.
  absl::StatusOr<std::shared_ptr<const anvil::io::Checkpoint>> open(
      const std::function<void(const std::string&)>& warn) {
    if (!opened_) {
      absl::StatusOr<anvil::io::Checkpoint> c = anvil::io::open_newest_complete(
          dir_, step_, [this](const std::string& w) { warnings_.push_back(w); });
      if (c.ok()) {
        opened_ = std::make_shared<const anvil::io::Checkpoint>(*std::move(c));
      } else {
        opened_ = c.status();
      }
    }
    for (const std::string& w : warnings_) warn(w);
    return *opened_;
  }

 private:
  std::string dir_;
  int64_t step_;
  std::vector<std::string> warnings_;
  std::optional<absl::StatusOr<std::shared_ptr<const anvil::io::Checkpoint>>> opened_;
};

// The run loop's checkpoint record (model/ does not include io/) and io's manifest: the same
// fields, converted here alone, both ways.
io::CheckpointInfo checkpoint_info(const model::CheckpointRecord& r) {
  io::CheckpointInfo info;
  info.step = r.step;
  info.config = r.config;
  info.state = r.state;
  info.layout = r.layout;
  info.lr_schedule = r.lr_schedule;
  info.grad_scaler = r.grad_scaler;
  info.model = r.model;
  info.attachments = r.attachments;
  return info;
}

model::CheckpointRecord checkpoint_record(const io::CheckpointInfo& info) {
  model::CheckpointRecord r;
  r.step = info.step;
  r.config = info.config;
  r.state = info.state;
  r.layout = info.layout;
  r.lr_schedule = info.lr_schedule;
  r.grad_scaler = info.grad_scaler;
  r.model = info.model;
  r.attachments = info.attachments;
  return r;
}

// The files of the run's checkpoints (model/train/run_loop.h): io/checkpoint over [checkpoint]
// save, and the load of `resume`.
model::CheckpointFiles checkpoint_files(const model::CheckpointConfig& ck,
                                        std::shared_ptr<ResumeCheckpoint> resume) {
  model::CheckpointFiles f;
  f.begin = [dir = ck.save](int64_t step, const std::string& token) {
    return io::begin_checkpoint(dir, step, token);
  };
  f.write_shard = [dir = ck.save](int64_t step, const std::string& token, int rank,
                                  const std::vector<anvil::engine::HostSlice>& slices) {
    return io::write_checkpoint_shard(io::checkpoint_tmp_dir(dir, step, token), rank, slices);
  };
  f.finish = [dir = ck.save, keep = ck.keep_last](
                 int64_t step, const std::string& token, int world,
                 const model::CheckpointRecord& r) -> absl::Status {
    return io::finish_checkpoint(dir, io::checkpoint_tmp_dir(dir, step, token), world,
                                 checkpoint_info(r), keep);
  };
  f.remove_stale =
      [dir = ck.save](const std::string& token) -> absl::StatusOr<std::vector<std::string>> {
    std::error_code ec;
    if (!std::filesystem::is_directory(dir, ec)) return std::vector<std::string>{};  // a new one
    return io::remove_stale_checkpoint_temps(dir, token);
  };
  f.step_dir = [dir = ck.save](int64_t step) { return io::checkpoint_step_dir(dir, step); };
  f.open_newest = [resume](const std::function<void(const std::string&)>& warn)
      -> absl::StatusOr<model::OpenedCheckpoint> {
    ANVIL_ASSIGN_OR_RETURN(std::shared_ptr<const io::Checkpoint> c, resume->open(warn));
    model::OpenedCheckpoint o;
    o.dir = c->dir();
    o.record = checkpoint_record(c->info());
    o.tensor_names = c->tensor_names();
    o.read = [c](const std::string& name) { return c->read(name); };
    return o;
  };
  return f;
}

// The trainer's side of a checkpoint: its model's boxes (model/model.h), their load, and the
// run's state.
model::CheckpointedModel checkpointed(model::Trainer& t) {
  model::CheckpointedModel m;
  m.slices = [&t](int dp_rank) { return t.model().checkpoint_slices(dp_rank, t.stream()); };
  m.load = [&t](const model::TensorLookup& lookup, bool weights_only) {
    return t.model().load_checkpoint(lookup, weights_only, t.stream());
  };
  m.steps_done = [&t] { return t.steps_done(); };
  m.state = [&t] { return t.state(); };
  m.restore = [&t](const model::TrainerState& s) { t.restore(s); };
  return m;
}

// The training samples the run reads: [train] train_samples or steps x global_batch, or more
// when it resumes a checkpoint trained with larger batches (its consumed samples plus this
// run's remaining steps). Without a checkpoint to resume, the load reports why later.
int64_t train_samples_needed(const model::TrainConfig& cfg, ResumeCheckpoint& resume) {
  const int64_t planned = cfg.train.run_samples();
  const model::CheckpointConfig& ck = cfg.checkpoint;
  if (ck.load.empty() || ck.finetune) return planned;
  absl::StatusOr<std::shared_ptr<const anvil::io::Checkpoint>> c =
      resume.open([](const std::string&) {});
  if (!c.ok()) return planned;
  absl::StatusOr<model::TrainerState> s = model::trainer_state_from((*c)->info().state, cfg);
  return s.ok() ? std::max(planned, model::resumed_run_samples(*s, cfg)) : planned;
}

// TensorBoard events from the last rank, as Megatron (every rank has the step's loss and norm):
// its writer there, null on the other ranks and without [log] tensorboard_dir.
absl::StatusOr<std::unique_ptr<anvil::io::TensorBoardWriter>> open_tensorboard(
    const model::TrainConfig& cfg, int rank, int world, const anvil::engine::LogContext& ctx) {
  std::unique_ptr<anvil::io::TensorBoardWriter> none;
  if (cfg.log.tensorboard_dir.empty()) return none;
  log_info(ctx, absl::StrFormat("TensorBoard events: %s/events.out.tfevents.* (rank %d)",
                                cfg.log.tensorboard_dir, world - 1));
  if (rank != world - 1) return none;
  auto w = anvil::io::TensorBoardWriter::open(cfg.log.tensorboard_dir);
  if (!w.ok()) {
    return absl::Status(w.status().code(),
                        absl::StrCat("[log] tensorboard_dir: ", w.status().message()));
  }
  return std::move(*w);
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
  ANVIL_ASSIGN_OR_RETURN(
      std::unique_ptr<anvil::io::Tokenizer> tok,
      anvil::io::make_tokenizer({t.type, t.vocab_file, t.merge_file, t.vocab_extra_ids}));
  model::EvalSuite suite;
  suite.pad = static_cast<int32_t>(cfg.data.eod_token);
  if (model::family_of(cfg).encoder_decoder) {
    // The decoder starts from the [BOS] of the span-corruption samples (io/t5_dataset.h) and
    // pads with [PAD], as they do.
    ANVIL_ASSIGN_OR_RETURN(anvil::io::MlmVocab vocab, anvil::io::make_mlm_vocab(*tok));
    suite.pad = vocab.pad;
    suite.decoder_start = vocab.bos;
  }
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

// Runs `tr` with the run's checkpoints (model/train/run_loop.h); bin/train's exit status
// (fatal: a rank-local error that ends every rank; fail: one every rank has).
template <typename Fatal>
int train_loop(const model::RunContext& run, model::Trainer& tr,
               std::shared_ptr<ResumeCheckpoint> resume, const anvil::engine::Timer& started,
               const Fatal& fatal, const ErrorPrinter& fail) {
  const model::RunEnd end = model::run_with_checkpoints(
      run, tr, checkpointed(tr), checkpoint_files(run.cfg->checkpoint, std::move(resume)),
      [&started] { return started.seconds(); });
  if (!end.fatal.ok()) return fatal(end.fatal);
  if (!end.shared.ok()) {  // every rank has it: rank 0 reports, each exits 1 without an abort
    ErrorPrinter shared = fail;
    shared.rank_local = false;
    return shared(end.shared);
  }
  return 0;
}

// The run's facts shared by every rank; collective (rank 0's pid names the save's temporaries).
model::RunContext run_context(const model::TrainConfig& cfg, std::string config_text,
                              const anvil::parallel::ProcessGrid& grid,
                              anvil::parallel::Comm* world, const anvil::engine::LogContext& ctx) {
  double token = static_cast<double>(::getpid());
  if (world != nullptr) {
    anvil::engine::Stream cpu = anvil::engine::Stream::cpu();
    world->broadcast(anvil::engine::make_view(&token, anvil::engine::DType::kF64,
                                              anvil::engine::Device::kCpu, {1}),
                     0, cpu);
  }
  model::RunContext run;
  run.cfg = &cfg;
  run.config_text = std::move(config_text);
  run.attachments = tokenizer_attachments(cfg.tokenizer);
  run.grid = &grid;
  run.world = world;
  run.token = absl::StrCat(static_cast<int64_t>(token));
  run.ctx = ctx;
  return run;
}

// The pinned host memory of a CUDA rank's optimizer offload (outside its GPU plan).
std::string offload_line(size_t bytes) {
  return absl::StrFormat(
      "optimizer offload ([parallel] offload_optimizer): %s (%d bytes) of pinned host memory on "
      "this rank (f32 master weights, AdamW m and v, gradient and parameter staging), not in the "
      "GPU plan above",
      format_bytes(static_cast<double>(bytes)), bytes);
}

// --dry-run --world N: every pipeline stage's memory plan for rank (tp 0, stage, dp 0) of the
// config's N-rank grid, planned here without a communicator (the TP and DP ranks of a stage plan
// alike up to ZeRO's remainders). With --device-memory the largest must fit.
int plan_world(const model::TrainConfig& cfg, const model::Precision& prec,
               const anvil::bin::DeviceMemory& stated, const anvil::engine::LogContext& ctx,
               const ErrorPrinter& fail) {
  std::optional<anvil::engine::MemoryPlan> largest;
  int largest_stage = 0;
  for (int stage = 0; stage < cfg.parallel.pp; ++stage) {
    model::ModelPlace at;
    at.pp_rank = stage;
    absl::StatusOr<anvil::engine::MemoryPlan> plan = model::Trainer::plan(cfg, prec, at);
    if (!plan.ok()) return fail(plan.status());
    log_info(ctx,
             absl::StrFormat("pipeline stage %d of %d (tp %d x pp %d x dp %d): %s", stage,
                             cfg.parallel.pp, cfg.parallel.tp, cfg.parallel.pp, cfg.parallel.dp,
                             format_bytes(static_cast<double>(plan->total_bytes()))));
    if (!largest || plan->total_bytes() > largest->total_bytes()) {
      largest = std::move(*plan);
      largest_stage = stage;
    }
  }
  log_info(ctx, absl::StrFormat("memory plan of the largest stage (%d, micro_batch %d):\n%s",
                                largest_stage, cfg.train.micro_batch, largest->format()));
  if (prec.device == anvil::engine::Device::kCuda && cfg.parallel.offload_optimizer) {
    model::ModelPlace at;
    at.pp_rank = largest_stage;
    absl::StatusOr<size_t> host = model::train_model_offload_bytes(cfg, prec, at);
    if (!host.ok()) return fail(host.status());
    log_info(ctx, offload_line(*host));
  }
  if (stated.bytes == 0) return 0;
  std::string line;
  if (absl::Status s = anvil::bin::check_stated_fit(*largest, stated, &line); !s.ok()) {
    return fail(s);
  }
  log_info(ctx, line);
  return 0;
}

int run(int argc, char** argv) {
  // From here on a stop signal only sets a flag: the training loop saves and ends the run.
  // exit_duration_min counts from here.
  anvil::engine::install_stop_signals();
  const anvil::engine::Timer started;
  ErrorPrinter fail;
  std::optional<std::string> config_path;
  std::vector<std::string> overrides;
  bool dry_run = false, print_docs = false, print_device = false;
  anvil::bin::DeviceMemory stated;  // --device-memory
  int planned_world = 0;            // --world: a dry run of that many ranks
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
    } else if (a == "--world" || absl::StartsWith(a, "--world=")) {
      if (a == "--world" && i + 1 == argc) {
        std::fprintf(stderr, "train: error: --world needs a value\n%s", kUsage);
        return 2;
      }
      const std::string v = a == "--world" ? argv[++i] : a.substr(8);
      if (!absl::SimpleAtoi(v, &planned_world) || planned_world < 1) {
        std::fprintf(stderr, "train: error: --world '%s': expected a rank count >= 1\n",
                     v.substr(0, 64).c_str());
        return 2;
      }
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
  if (planned_world > 0 && !dry_run) {
    std::fprintf(stderr, "train: error: --world plans a dry run: add --dry-run\n");
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
  if (planned_world > 0 && launch->world > 1) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("--world %d plans from one process; it was launched as %d ranks",
                        planned_world, launch->world)));
  }
  fail.rank = launch->rank;
  fail.world = launch->world;
  const int config_world = planned_world > 0 ? planned_world : launch->world;
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
          model::load_train_config(*config_path, overrides, nullptr, config_world).status();
      return fail(parsed.ok() ? more.status() : parsed);
    }
    all.insert(all.end(), more->begin(), more->end());
  }
  anvil::engine::Config raw;
  absl::StatusOr<model::TrainConfig> loaded =
      model::load_train_config(*config_path, all, &raw, config_world);
  if (!loaded.ok()) return fail(loaded.status());
  const model::TrainConfig& cfg = *loaded;
  anvil::engine::set_interrupt_message(launch->rank == 0, !cfg.checkpoint.save.empty());
  // A dry run of a CUDA job where no GPU is visible (a login node) plans for the stated GPU.
  const bool absent_gpu =
      dry_run && cfg.train.device == "cuda" && anvil::engine::cuda_device_count() == 0;
  if (absent_gpu && !anvil::engine::cuda_kernels_built()) {
    return fail(absl::FailedPreconditionError(
        "--dry-run of a [train] device = cuda run: this build has no CUDA kernels (cmake "
        "-DANVIL_CUDA_KERNELS=OFF, as `make demo` builds on a machine without a GPU), so it "
        "cannot size their workspaces; plan it with a full build"));
  }
  absl::StatusOr<model::Precision> prec =
      absent_gpu ? anvil::bin::planned_cuda_precision(cfg.train.precision.mode)
                 : model::resolve_precision(cfg.train.device, cfg.train.precision.mode);
  if (!prec.ok()) return fail(prec.status());
  if (cfg.train.attention_kernel == "auto") prec->attention = anvil::ops::AttentionKernel::kWgmma;
  prec->save_dropout_mask = cfg.train.attention_dropout_mask == "save";
  prec->fused_activation_dropout = cfg.train.activation_dropout_kernel == "one_pass";
  if (absent_gpu && stated.bytes == 0) stated = anvil::bin::default_device_memory();
  if (print_device) {
    std::printf("%s\n", std::string(anvil::engine::device_name(prec->device)).c_str());
    return 0;
  }
  const anvil::engine::LogContext ctx{launch->rank, launch->world, cfg.log.all_ranks};
  if (planned_world > 0) return plan_world(cfg, *prec, stated, ctx, fail);
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
  fail.rank_local = true;
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
  const model::Family& family = model::family_of(cfg);  // looked up once
  const int64_t T = cfg.data.seq_len;
  const int64_t tokens_per_step = cfg.train.global_batch * T;
  log_info(ctx, family.summary(cfg));
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
  log_info(ctx,
           absl::StrCat(cuda ? absl::StrFormat("device: cuda:%d (%s)", cuda_device, precision)
                             : absl::StrCat("device: cpu (", precision, ")"),
                        "; parallel: ", (*rt)->grid().describe(), ", launcher ", launch->launcher,
                        ", ZeRO stage ", cfg.parallel.zero_stage,
                        cfg.parallel.offload_optimizer ? ", optimizer offloaded to the host" : ""));

  const anvil::parallel::ProcessGrid& grid = (*rt)->grid();
  absl::StatusOr<int64_t> act_slots = family.activation_slots(cfg, place_of(grid));
  if (!act_slots.ok()) return fatal(act_slots.status());
  absl::StatusOr<anvil::engine::MemoryPlan> plan = model::Trainer::plan(cfg, *prec, place_of(grid));
  if (!plan.ok()) return fatal(plan.status());
  log_info(ctx, absl::StrFormat("memory plan of this rank (micro_batch %d, seq_len %d, tp rank %d "
                                "of %d, pipeline stage %d of %d, %d activation slot(s)):\n%s",
                                cfg.train.micro_batch, T, grid.tp_rank(), grid.tp_size(),
                                grid.pp_rank(), grid.pp_size(), *act_slots, plan->format()));
  if (cuda && cfg.parallel.offload_optimizer) {
    absl::StatusOr<size_t> host = model::train_model_offload_bytes(cfg, *prec, place_of(grid));
    if (!host.ok()) return fatal(host.status());
    log_info(ctx, offload_line(*host));
  }
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
  // Opened before the data so that an unusable directory fails at once.
  absl::StatusOr<std::unique_ptr<anvil::io::TensorBoardWriter>> tensorboard =
      open_tensorboard(cfg, launch->rank, launch->world, ctx);
  if (!tensorboard.ok()) return fatal(tensorboard.status());

  // Data: Megatron's GPT datasets over the split (io/gpt_dataset, io/blended_dataset), with
  // Megatron's sample counts; the index caches are built here by every process that lacks them.
  std::array<int64_t, 3> want = anvil::io::megatron_split_samples(
      cfg.train.steps, cfg.train.global_batch, cfg.train.eval_interval, cfg.train.eval_iters);
  auto resume = std::make_shared<ResumeCheckpoint>(cfg.checkpoint);
  want[0] = train_samples_needed(cfg, *resume);  // Megatron: --train-samples when given
  DataStreams data;  // (the samples' owners live as long as the trainer)
  if (absl::Status s = open_data(family, cfg, want, ctx, &data); !s.ok()) return fatal(s);
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
  if (*tensorboard) tr.set_metrics_sink(tensorboard_sink(**tensorboard, ctx));
  if (cfg.eval.any()) {
    absl::StatusOr<model::EvalSuite> suite = load_eval_suite(cfg);
    if (!suite.ok()) return fatal(suite.status());
    const model::EvalParallel ep =
        model::eval_parallel((*rt)->grid(), (*rt)->comms(), tr.pipeline_comm());
    tr.set_eval_hook([&, ep, suite = *std::move(suite)](int64_t step) {
      const absl::Status s =
          family.encoder_decoder
              ? model::run_seq2seq_eval_suite(
                    suite, tr.model(),
                    {cfg.train.micro_batch, T, cfg.data.decoder_seq_len, cfg.model.vocab_size}, ep,
                    tr.stream(), ctx, step, cfg.train.steps)
              : model::run_eval_suite(suite, model::gpt_model(tr.model()),
                                      {cfg.train.micro_batch, T}, ep, tr.stream(), ctx, step,
                                      cfg.train.steps);
      if (!s.ok()) log_warning(ctx, absl::StrCat("[eval]: ", s.message()));
    });
  }
  const model::RunContext run =
      run_context(cfg, raw.dump(), (*rt)->grid(), (*rt)->comms().world.get(), ctx);
  return train_loop(run, tr, std::move(resume), started, fatal, fail);
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }
