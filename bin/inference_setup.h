// Shared by bin/generate and bin/serve (header only: bin/*.cc are the programs): opens a
// checkpoint for inference (one rank, or tensor-parallel over the ranks of an mpirun / srun
// launch: every rank opens the checkpoint and takes its slice), and parses the options both
// take. The checkpoint's own
// config gives the model shape, the [tokenizer] (its files are the copies kept in the checkpoint's
// tokenizer/) and the EOD id ([data] eod_token); the parallel layout it was trained with does not
// matter (weights are stored unsharded).
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "engine/cuda_check.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "io/checkpoint.h"
#include "io/tokenizer.h"
#include "model/infer/gpt_inference.h"
#include "model/train/arch_record.h"
#include "model/train/family.h"
#include "model/train/train_config.h"
#include "parallel/bootstrap.h"
#include "parallel/nccl_comm.h"
#include "parallel/runtime.h"

namespace anvil::bin {

struct InferenceOptions {
  std::string checkpoint;       // DIR (its `latest`) or DIR/step_X
  std::string device = "auto";  // auto | cpu | cuda
  int64_t max_batch = 1;
  int64_t max_len = 0;   // 0: the model's max_seq_len
  bool dry_run = false;  // print the memory plan, load nothing
  // A tokenizer from files instead of the checkpoint's [tokenizer] (type "": the checkpoint's),
  // e.g. for a checkpoint imported from Hugging Face, which keeps none.
  model::TokenizerConfig tokenizer;
  // Tensor parallelism over a launch's ranks (tp_comm on each rank; null: one rank) and the
  // CUDA device of this rank.
  model::GptShard shard;
  int cuda_device = 0;
};

// The TP group of a launch: every rank of it in one TP group, with an MPI (CPU) or NCCL (CUDA)
// communicator. Without a launcher (or a world of one): no runtime, shard stays single-rank.
struct TpLaunch {
  std::unique_ptr<parallel::ParallelRuntime> runtime;
  std::unique_ptr<parallel::NcclComm> nccl;
  int rank = 0;
};

inline absl::StatusOr<TpLaunch> start_tp(const std::string& device, InferenceOptions* o) {
  TpLaunch t;
  ANVIL_ASSIGN_OR_RETURN(parallel::LaunchInfo launch,
                         parallel::launch_info_from_env(parallel::env_map(environ)));
  if (!launch.launched()) return t;
  parallel::CommOptions opt;
  ANVIL_ASSIGN_OR_RETURN(t.runtime,
                         parallel::ParallelRuntime::start(launch, launch.world, 1, 1, opt));
  t.rank = launch.rank;
  engine::set_process_rank(launch.rank);
  if (launch.world == 1) return t;
  ANVIL_ASSIGN_OR_RETURN(model::Precision prec, model::resolve_precision(device));
  o->shard.tp = launch.world;
  o->shard.tp_rank = t.runtime->grid().tp_group().index;
  parallel::Comm* tp_cpu = t.runtime->comms().tp.get();  // MPI or TCP (torchrun)
  o->shard.tp_comm = tp_cpu;
  if (prec.device == engine::Device::kCuda) {
    o->cuda_device = launch.local_rank % engine::cuda_device_count();
    ANVIL_CUDA_CHECK(cudaSetDevice(o->cuda_device));
    const parallel::ProcessGroup& group = t.runtime->grid().tp_group();
    const parallel::BroadcastBytes bootstrap =
        t.runtime->store() != nullptr ? parallel::broadcast_through(*t.runtime->store(), group)
                                      : parallel::broadcast_over(*tp_cpu);
    ANVIL_ASSIGN_OR_RETURN(t.nccl, parallel::NcclComm::create(group, launch.rank, bootstrap, opt));
    o->shard.tp_comm = t.nccl.get();
  }
  return t;
}

struct InferenceSetup {
  std::string dir;  // the checkpoint step directory used
  model::TrainConfig config;
  model::Precision precision;
  engine::MemoryPlan plan;
  std::unique_ptr<engine::Stream> stream;
  std::unique_ptr<model::GptInference> model;  // null with dry_run
  std::unique_ptr<io::Tokenizer> tokenizer;    // null without [tokenizer]
  int32_t eod = -1;
};

// The tokenizer of the checkpoint's [tokenizer], from the files kept with the checkpoint.
inline absl::StatusOr<std::unique_ptr<io::Tokenizer>> checkpoint_tokenizer(
    const io::Checkpoint& c, const model::TokenizerConfig& t) {
  auto kept = [&](const std::string& path) -> absl::StatusOr<std::string> {
    if (path.empty()) return std::string();  // a tokenizer without files (Byte)
    std::string file = std::filesystem::path(path).filename().string();
    // bin/train keeps DIR/tokenizer.json when an HF vocab_file names a directory.
    if (t.type == "HF" && !absl::EndsWith(file, ".json")) file = "tokenizer.json";
    auto it = c.info().attachments.find("tokenizer/" + file);
    if (it == c.info().attachments.end()) {
      return absl::NotFoundError(absl::StrCat(c.dir(), ": no tokenizer/", file,
                                              " kept with the checkpoint ([tokenizer] ", t.type,
                                              " names ", path, ")"));
    }
    return it->second;
  };
  ANVIL_ASSIGN_OR_RETURN(std::string vocab, kept(t.vocab_file));
  std::string merges;
  if (!t.merge_file.empty()) {
    ANVIL_ASSIGN_OR_RETURN(merges, kept(t.merge_file));
  }
  return io::make_tokenizer({t.type, vocab, merges});
}

inline absl::StatusOr<InferenceSetup> open_for_inference(const InferenceOptions& o) {
  InferenceSetup s;
  std::error_code ec;
  if (!std::filesystem::is_directory(o.checkpoint, ec)) {
    return absl::NotFoundError(absl::StrCat("checkpoint directory ", o.checkpoint,
                                            " not found (give DIR or DIR/step_XXXXXXXX)"));
  }
  absl::StatusOr<io::Checkpoint> c =
      std::filesystem::exists(o.checkpoint + "/manifest.json")
          ? io::Checkpoint::open(o.checkpoint)
          : io::open_newest_complete(o.checkpoint, -1, [](const std::string& w) {
              std::fprintf(stderr, "warning: %s\n", w.c_str());
            });
  if (!c.ok()) return c.status();
  s.dir = c->dir();
  // Single rank: the training layout is irrelevant to the unsharded weights, and so is the
  // training sample length (an HF import's config has [model] only, and the default [data]
  // seq_len may exceed its max_seq_len).
  ANVIL_ASSIGN_OR_RETURN(
      s.config,
      model::load_train_config_string(
          c->info().config, s.dir + "/manifest.json (config)",
          {"parallel.tp=1", "parallel.pp=1", "parallel.virtual_stages=1", "parallel.dp=0",
           "parallel.zero_stage=0", "parallel.sequence_parallel=false", "data.seq_len=1"}));
  // The checkpoint's family, looked up once: a causal LM runs here.
  ANVIL_RETURN_IF_ERROR(model::check_causal_lm(model::family_of(s.config)));
  // Saved with the padded rows in the loss: they are parameters, loaded at the saved count.
  ANVIL_RETURN_IF_ERROR(model::adopt_vocab_padding(c->info().model, static_cast<int>(o.shard.tp),
                                                   s.dir, s.config.model));
  ANVIL_ASSIGN_OR_RETURN(s.precision, model::resolve_precision(o.device));
  const model::InferenceShape shape{o.max_batch, o.max_len};
  ANVIL_ASSIGN_OR_RETURN(s.plan,
                         model::GptInference::plan(s.config.model, shape, s.precision, o.shard));
  s.eod = static_cast<int32_t>(s.config.data.eod_token);
  const model::TokenizerConfig& t = o.tokenizer;
  if (!t.type.empty()) {
    ANVIL_ASSIGN_OR_RETURN(s.tokenizer, io::make_tokenizer({t.type, t.vocab_file, t.merge_file}));
  } else if (!s.config.tokenizer.type.empty()) {
    ANVIL_ASSIGN_OR_RETURN(s.tokenizer, checkpoint_tokenizer(*c, s.config.tokenizer));
  }
  if (s.tokenizer && s.tokenizer->vocab_size() > s.config.model.vocab_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("the tokenizer's vocabulary (", s.tokenizer->vocab_size(),
                     ") is larger than the model's (", s.config.model.vocab_size, ")"));
  }
  if (o.dry_run) return s;
  if (s.precision.device == engine::Device::kCuda) {
    ANVIL_ASSIGN_OR_RETURN(engine::Stream st, engine::Stream::cuda(o.cuda_device));
    s.stream = std::make_unique<engine::Stream>(std::move(st));
  } else {
    s.stream = std::make_unique<engine::Stream>(engine::Stream::cpu());
  }
  ANVIL_ASSIGN_OR_RETURN(s.model,
                         model::GptInference::create(s.config.model, shape, s.precision, o.shard));
  const io::Checkpoint& ck = *c;
  ANVIL_RETURN_IF_ERROR(
      s.model->load([&ck](const std::string& name) { return ck.read(name); }, *s.stream));
  return s;
}

// A user's value quoted in a message: its first 64 bytes, then "..." (a value may be megabytes).
inline std::string cut_for_message(std::string_view v) {
  constexpr size_t kShown = 64;
  return v.size() <= kShown ? std::string(v) : std::string(v.substr(0, kShown)) + "...";
}

// Consumes the tokenizer options at args[*i] (--tokenizer-type, --vocab-file, --merge-file):
// true when args[*i] was one (then *i is on its value), false otherwise; InvalidArgument when
// the value is missing.
inline absl::StatusOr<bool> parse_tokenizer_flag(const std::vector<std::string>& args, size_t* i,
                                                 InferenceOptions* o) {
  const std::string& k = args[*i];
  std::string* field = k == "--tokenizer-type" ? &o->tokenizer.type
                       : k == "--vocab-file"   ? &o->tokenizer.vocab_file
                       : k == "--merge-file"   ? &o->tokenizer.merge_file
                                               : nullptr;
  if (field == nullptr) return false;
  if (*i + 1 >= args.size()) return absl::InvalidArgumentError(k + " needs a value");
  *field = args[++*i];
  return true;
}

}  // namespace anvil::bin
