// bin/finetune: classification and multiple-choice finetuning of a GPT at its last token
// (docs/eval.md, model/tasks/finetune_cls.h) from an ini config with a [finetune] section:
//   build/bin/finetune CONFIG [section.key=value ...]
//   mpirun -np N build/bin/finetune CONFIG        (N = tp * pp * dp ranks of [parallel])
// Starts from [checkpoint] load (weights only, and the classifier of a linear head when the
// checkpoint has one) or a fresh model, trains [train] steps on [finetune] train_data with
// global_batch examples per step (micro_batch per forward), logs the loss every log_interval
// steps and each dev set's accuracy before the first step, every eval_interval steps, at the
// end of every epoch and at the end, and saves the result (with the head) into [checkpoint]
// save. Without train_data it only evaluates the dev sets with the weights (and classifier)
// of [checkpoint] load. The example order is its own (a
// shuffle per epoch seeded by [data] seed), the same for every number of ranks.
// [parallel] tp, pp and dp shard the model as bin/train does (model/tasks/finetune_cls.h: the head
// on the last pipeline stage, replicated over TP); the checkpoint loaded may come from any layout.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/log.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "io/checkpoint.h"
#include "io/task_data.h"
#include "io/tokenizer.h"
#include "model/blocks/cls_head.h"
#include "model/stack/gpt.h"
#include "model/tasks/finetune_cls.h"
#include "model/train/arch_record.h"
#include "model/train/checkpoint.h"
#include "model/train/family.h"
#include "model/train/train_config.h"
#include "parallel/grid.h"
#include "parallel/group_comm.h"
#include "parallel/launch_env.h"
#include "parallel/parallel_config.h"
#include "parallel/runtime.h"

namespace {

namespace model = anvil::model;
namespace io = anvil::io;
namespace parallel = anvil::parallel;
using anvil::engine::log_info;
using anvil::engine::log_warning;

constexpr char kUsage[] = "usage: finetune CONFIG [section.key=value ...] (docs/eval.md)\n";
constexpr char kFormats[][6] = {"jsonl", "mnli", "qqp", "race"};

struct DevSet {
  std::string name;
  std::vector<model::ClsExample> examples;
};

// The examples of the comma-separated paths, tokenized for the task.
absl::StatusOr<std::vector<model::ClsExample>> load_examples(const std::vector<std::string>& paths,
                                                             const model::TrainConfig& cfg,
                                                             const io::Tokenizer& tok,
                                                             const io::SequenceLayout& layout,
                                                             const anvil::engine::LogContext& ctx) {
  const model::FinetuneConfig& f = cfg.finetune;
  std::vector<model::ClsExample> out;
  for (const std::string& path : paths) {
    ANVIL_ASSIGN_OR_RETURN(io::TaskData d,
                           io::load_task_data(kFormats[static_cast<int>(f.format)], path, tok,
                                              cfg.data.seq_len, f.max_qa_length, layout));
    for (size_t i = 0; i < d.warnings.size() && i < 10; ++i) log_warning(ctx, d.warnings[i]);
    if (d.warnings.size() > 10) {
      log_warning(ctx, absl::StrFormat("%s: %d rows skipped in all", path, d.warnings.size()));
    }
    for (io::TaskExample& e : d.examples) {
      out.push_back({std::move(e.tokens), std::move(e.types), std::move(e.choices),
                     std::move(e.choice_types), e.label});
    }
  }
  return out;
}

absl::StatusOr<model::ClsTask> make_task(const model::TrainConfig& cfg, const model::Family& family,
                                         const io::Tokenizer& tok, int32_t pad) {
  const model::FinetuneConfig& f = cfg.finetune;
  if (f.head == model::FinetuneHead::kLinear) {
    const bool mc = f.task == model::FinetuneTask::kMultipleChoice;
    return model::ClsTask::create_linear(
        model::blocks::LinearHead(cfg.model.d_model, f.classes(), mc ? f.classes() : 1,
                                  cfg.model.init_std, cfg.train.seed, /*pooler=*/family.pooled_cls),
        cfg.model.vocab_size, pad);
  }
  if (family.pooled_cls) {
    return absl::InvalidArgumentError(
        absl::StrCat("[finetune] head: label_words reads the GPT's LM head; a ", family.title,
                     " needs head = linear"));
  }
  std::vector<int32_t> label_tokens;
  for (const std::string& w : f.labels) {
    const std::vector<int32_t> ids = tok.encode(w);
    if (ids.size() != 1) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "[finetune] labels: \"%s\" is %d tokens of the %s tokenizer; each label must be one", w,
          ids.size(), tok.name()));
    }
    label_tokens.push_back(ids[0]);
  }
  return model::ClsTask::create(label_tokens, cfg.model.vocab_size, pad);
}

// Every rank writes its boxes of the model (as bin/train: each element by one rank) and the
// last stage's TP / DP rank 0 the head; rank 0 creates the temporary directory and commits.
absl::Status save(const model::TrainConfig& cfg, const std::string& config_text, model::GptModel& m,
                  model::ClsTask& task, int64_t steps, const parallel::ProcessGrid& grid,
                  parallel::Comm* world, anvil::engine::Stream& s) {
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
  if (grid.rank() == 0) ANVIL_RETURN_IF_ERROR(io::begin_checkpoint(dir, steps, tok));
  barrier();
  const std::string tmp = io::checkpoint_tmp_dir(dir, steps, tok);
  std::vector<anvil::engine::HostSlice> slices = model::gpt_checkpoint_slices(m, grid.dp_rank(), s);
  if (task.head() != nullptr && grid.is_last_stage() && grid.tp_rank() == 0 &&
      grid.dp_rank() == 0) {
    for (anvil::engine::HostSlice& h : task.head()->slices()) slices.push_back(std::move(h));
  }
  ANVIL_RETURN_IF_ERROR(io::write_checkpoint_shard(tmp, grid.rank(), slices));
  barrier();
  if (grid.rank() == 0) {
    io::CheckpointInfo info;
    info.step = steps;
    info.config = config_text;
    // Weights for `finetune = true` loads; the counters say how many updates made them.
    model::TrainerState state;
    state.step = state.optimizer_steps = steps;
    info.state = model::checkpoint_counters(state, cfg);
    info.layout = model::checkpoint_layout(cfg);
    info.lr_schedule = model::checkpoint_lr_schedule(cfg, state);
    model::TrainConfig saved = cfg;
    saved.model.binary_head = false;  // the finetuned model has none (see run())
    info.model = model::checkpoint_model_record(saved);
    ANVIL_RETURN_IF_ERROR(
        io::finish_checkpoint(dir, tmp, grid.world(), info, cfg.checkpoint.keep_last));
  }
  barrier();
  return absl::OkStatus();
}

// The model part of this rank (as bin/train's, one model chunk per stage), with the activation
// slots of the finetuning step's pipeline plan.
// The checkpoint holds the model this run describes: every [model] key that decides what a
// tensor means must match (model/train/arch_record.h), except those a finetune may change. The
// binary head is not loaded here (the finetuned model has none), so it may differ too.
absl::Status check_finetune_model(const io::Checkpoint& c, const model::TrainConfig& cfg) {
  std::map<std::string, std::string> saved = c.info().model;
  saved.erase("bert_binary_head");
  model::TrainConfig run_cfg = cfg;
  run_cfg.checkpoint.finetune = true;
  return model::check_checkpoint_model(saved, run_cfg, c.dir());
}

absl::StatusOr<model::GptShard> finetune_shard(const model::TrainConfig& cfg,
                                               const parallel::ProcessGrid& grid) {
  const anvil::parallel::ParallelConfig& pc = cfg.parallel;
  model::GptShard sh;
  sh.tp = pc.tp;
  sh.tp_rank = grid.tp_rank();
  ANVIL_ASSIGN_OR_RETURN(
      std::vector<std::vector<int64_t>> parts,
      anvil::parallel::partition_layers(cfg.model.n_layers, pc.pp, pc.pipeline_partition));
  sh.chunks = {parts[static_cast<size_t>(grid.pp_rank())]};
  sh.pre = grid.is_first_stage();
  sh.post = grid.is_last_stage();
  sh.sequence_parallel = pc.sequence_parallel;
  sh.recompute = pc.recompute == "full"        ? model::Recompute::kFull
                 : pc.recompute == "selective" ? model::Recompute::kSelective
                                               : model::Recompute::kNone;
  ANVIL_ASSIGN_OR_RETURN(sh.act_slots,
                         model::cls_activation_slots(pc.pp, grid.pp_rank(), cfg.train.global_batch,
                                                     cfg.train.micro_batch, pc.dp));
  ANVIL_RETURN_IF_ERROR(sh.validate(cfg.model));
  return sh;
}

absl::Status run(const std::string& path, const std::vector<std::string>& overrides) {
  ANVIL_ASSIGN_OR_RETURN(parallel::LaunchInfo launch,
                         parallel::launch_info_from_env(parallel::env_map(environ)));
  anvil::engine::set_process_rank(launch.rank);
  anvil::engine::Config raw;
  ANVIL_ASSIGN_OR_RETURN(model::TrainConfig cfg,
                         model::load_train_config(path, overrides, &raw, launch.world));
  if (!cfg.checkpoint.load.empty()) {
    // Saved with the padded vocabulary rows in the loss: they are parameters of the model (and
    // of the checkpoint this run writes), at the saved count.
    ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c,
                           io::open_newest_complete(cfg.checkpoint.load, cfg.checkpoint.load_step,
                                                    [](const std::string&) {}));
    ANVIL_RETURN_IF_ERROR(
        model::adopt_vocab_padding(c.info().model, cfg.parallel.tp, c.dir(), cfg.model));
  }
  const model::FinetuneConfig& f = cfg.finetune;
  if (f.train_data.empty() && (f.dev_data.empty() || cfg.checkpoint.load.empty())) {
    return absl::InvalidArgumentError(
        path +
        ": [finetune] train_data is not set (evaluating needs dev_data and [checkpoint] load)");
  }
  const anvil::parallel::ParallelConfig& pc = cfg.parallel;
  if (pc.virtual_stages != 1 || pc.zero_stage != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: bin/finetune runs 1F1B without ZeRO: [parallel] virtual_stages %d must be 1 and "
        "zero_stage %d must be 0",
        path, pc.virtual_stages, pc.zero_stage));
  }
  parallel::CommOptions copt;
  copt.timeout_s = pc.timeout_s;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<parallel::ParallelRuntime> rt,
                         parallel::ParallelRuntime::start(launch, pc.tp, pc.pp, pc.dp, copt));
  const parallel::ProcessGrid& grid = rt->grid();
  const anvil::engine::LogContext ctx{launch.rank, launch.world, cfg.log.all_ranks};
  const model::TokenizerConfig& t = cfg.tokenizer;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<io::Tokenizer> tok,
                         io::make_tokenizer({t.type, t.vocab_file, t.merge_file}));
  // GPT: sequences separated and ended by the end-of-document token, also the padding; BERT:
  // Megatron's [CLS] a [SEP] b [SEP] with its [PAD].
  const io::SpecialTokens& sp = tok->special();
  const model::Family& family = model::family_of(cfg);  // looked up once
  const bool bert = family.pooled_cls;
  if (bert && (sp.cls < 0 || sp.sep < 0)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "[tokenizer] %s has no [CLS] / [SEP] tokens, which a BERT's sequences need", tok->name()));
  }
  const int32_t eod = static_cast<int32_t>(sp.eod >= 0 ? sp.eod : cfg.data.eod_token);
  const int32_t pad = bert ? std::max(sp.pad, 0) : eod;
  const io::SequenceLayout layout{bert, bert ? sp.sep : eod, sp.cls};
  ANVIL_ASSIGN_OR_RETURN(model::ClsTask task, make_task(cfg, family, *tok, pad));
  ANVIL_ASSIGN_OR_RETURN(std::vector<model::ClsExample> train,
                         load_examples(f.train_data, cfg, *tok, layout, ctx));
  ANVIL_RETURN_IF_ERROR(task.check(train));
  std::vector<DevSet> devs;
  for (const std::string& d : f.dev_data) {
    ANVIL_ASSIGN_OR_RETURN(std::vector<model::ClsExample> ex,
                           load_examples({d}, cfg, *tok, layout, ctx));
    ANVIL_RETURN_IF_ERROR(task.check(ex));
    devs.push_back({d.substr(d.find_last_of('/', d.size() - 2) + 1), std::move(ex)});
  }

  ANVIL_ASSIGN_OR_RETURN(model::Precision prec,
                         model::resolve_precision(cfg.train.device, cfg.train.precision.mode));
  if (cfg.train.attention_kernel == "auto") prec.attention = anvil::ops::AttentionKernel::kWgmma;
  prec.save_dropout_mask = cfg.train.attention_dropout_mask == "save";
  prec.fused_activation_dropout = cfg.train.activation_dropout_kernel == "one_pass";
  anvil::engine::Stream s = anvil::engine::Stream::cpu();
  const bool cuda = prec.device == anvil::engine::Device::kCuda;
  if (cuda) {
    ANVIL_ASSIGN_OR_RETURN(
        s, anvil::engine::Stream::cuda(launch.local_rank % anvil::engine::cuda_device_count()));
  }
  // The model's rows: micro_batch examples of rows_per_example sequences.
  const model::GptRunShape shape{cfg.train.micro_batch * task.rows_per_example(), cfg.data.seq_len};
  // Each group's communicator on the model's device (NCCL on CUDA, parallel/group_comm.h; the CPU
  // one otherwise) next to its CPU communicator for the host numbers (the model takes the TP
  // one at creation).
  std::vector<std::unique_ptr<parallel::Comm>> owned;
  parallel::GroupComms& cpu = rt->comms();
  auto device_comm = [&](const parallel::ProcessGroup& g,
                         parallel::Comm* host) -> absl::StatusOr<parallel::Comm*> {
    return anvil::parallel::group_comm(g, host, rt->store(), launch.rank, cuda, copt, "", &owned);
  };
  ANVIL_ASSIGN_OR_RETURN(model::GptShard shard, finetune_shard(cfg, grid));
  model::ClsParallel par;
  if (pc.tp > 1) {
    ANVIL_ASSIGN_OR_RETURN(shard.tp_comm, device_comm(grid.tp_group(), cpu.tp.get()));
    par.tp_host = cpu.tp.get();
  }
  if (pc.pp > 1) {
    par.pp = pc.pp;
    par.stage = grid.pp_rank();
    par.pp_host = cpu.pp.get();
    ANVIL_ASSIGN_OR_RETURN(par.pp_comm, device_comm(grid.pp_group(), cpu.pp.get()));
    if (grid.is_first_stage() || grid.is_last_stage()) {
      ANVIL_ASSIGN_OR_RETURN(par.embedding,
                             device_comm(grid.embedding_group(), cpu.embedding.get()));
    }
  }
  if (pc.dp > 1) {
    par.host = cpu.dp.get();
    par.dp = pc.dp;
    par.rank = grid.dp_rank();
    ANVIL_ASSIGN_OR_RETURN(par.grads, device_comm(grid.dp_group(), par.host));
  }
  // A BERT classifies through the head's own pooler (Megatron's Classification: the language
  // model with its pooler, no binary head): the model's binary head is left out.
  model::GptConfig mcfg = cfg.model;
  mcfg.binary_head = false;
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<model::GptModel> m,
                         model::GptModel::create(mcfg, shape, prec, cfg.train.seed, shard));
  if (task.head() != nullptr && shard.post) m->set_hidden_head(true);
  if (!cfg.checkpoint.load.empty()) {
    ANVIL_ASSIGN_OR_RETURN(
        io::Checkpoint c,
        io::open_newest_complete(cfg.checkpoint.load, cfg.checkpoint.load_step,
                                 [&](const std::string& w) { log_warning(ctx, w); }));
    ANVIL_RETURN_IF_ERROR(check_finetune_model(c, cfg));
    const model::TensorLookup lookup = [&](const std::string& name) { return c.read(name); };
    ANVIL_RETURN_IF_ERROR(model::gpt_load_checkpoint(*m, lookup, /*weights_only=*/true, s));
    std::vector<std::string> head;
    if (task.head() != nullptr) {
      ANVIL_ASSIGN_OR_RETURN(head, task.head()->load(lookup));
    }
    // Megatron: "could not find classification_head in the checkpoint, initializing to random".
    log_info(ctx, absl::StrCat("finetune: weights of ", c.dir(),
                               task.head() == nullptr ? ""
                               : head.empty()         ? " (no head tensors: a fresh head)"
                                                      : absl::StrCat(" and head tensors ",
                                                                     absl::StrJoin(head, ", "))));
  }
  log_info(ctx, absl::StrFormat("finetune: %d training examples, dev sets %d, %d %s (%s head), "
                                "%d steps of %d examples, seq_len %d, tp %d, pp %d, dp %d, %s",
                                train.size(), devs.size(), task.classes(),
                                task.rows_per_example() > 1 ? "choices" : "classes",
                                raw.get_string("finetune", "head"), cfg.train.steps,
                                cfg.train.global_batch, cfg.data.seq_len, pc.tp, pc.pp, pc.dp,
                                anvil::engine::device_name(prec.device)));

  const int64_t steps = train.empty() ? 0 : cfg.train.steps;
  const int width = static_cast<int>(std::to_string(steps).size());
  auto evaluate = [&](int64_t step, const std::string& when) {
    for (const DevSet& d : devs) {
      const model::ClsResult r = task.evaluate(*m, shape, d.examples, s, par);
      log_info(ctx, absl::StrFormat("step %*d/%d | dev accuracy %.4f (%d/%d) | dev loss %.4f | "
                                    "%s%s",
                                    width, step, steps, r.accuracy(), r.correct, r.total, r.loss(),
                                    d.name, when));
    }
  };
  // Each epoch visits the training examples in a fresh shuffle ([data] seed); a step takes the
  // next global_batch of them.
  std::mt19937_64 rng(cfg.data.seed);
  std::vector<size_t> order(train.size());
  size_t next = order.size();
  int64_t epoch = 0;
  std::vector<model::ClsExample> batch;
  evaluate(0, "");
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
        o.clip_grad, s, &norm, par);
    ++loss_steps;
    if (step % cfg.train.log_interval == 0 || step == steps) {
      log_info(ctx,
               absl::StrFormat("step %*d/%d | loss %.4f | lr %.3e | grad norm %.3f", width, step,
                               steps, loss_sum / static_cast<double>(loss_steps), lr, norm));
      loss_sum = 0.0;
      loss_steps = 0;
    }
    if (step == steps) break;
    // Megatron evaluates at the end of every epoch: here after the step that completes one.
    const int64_t epochs = step * cfg.train.global_batch / static_cast<int64_t>(train.size());
    if (epochs > epoch) {
      epoch = epochs;
      evaluate(step, absl::StrCat(" | epoch ", epoch, " done"));
    } else if (cfg.train.eval_interval > 0 && step % cfg.train.eval_interval == 0) {
      evaluate(step, "");
    }
  }
  if (steps > 0) evaluate(steps, "");
  if (!cfg.checkpoint.save.empty() && steps > 0) {
    ANVIL_RETURN_IF_ERROR(save(cfg, raw.dump(), *m, task, steps, grid, rt->comms().world.get(), s));
    log_info(ctx, absl::StrCat("saved ", io::checkpoint_step_dir(cfg.checkpoint.save, steps)));
  }
  s.synchronize();  // transfers in flight use the model's buffers: done before they are freed
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
