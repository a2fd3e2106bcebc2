// bin/eval: zero-shot evaluation of a checkpoint (docs/eval.md), Megatron-DeepSpeed's
// tasks/zeroshot_gpt semantics:
//   build/bin/eval CKPT_DIR [--step N] TASK... [options]
//   --data PREFIX     perplexity over every token of a .bin/.idx dataset (documents in order)
//   --text FILE       WikiText-style perplexity: detokenized, tokenized whole, overlapping
//                     windows; loss, per-token and Megatron's adjusted (per-word) perplexity
//   --lambada FILE    LAMBADA accuracy (JSONL {"text": ...}): greedy last word
// Under mpirun / srun / torchrun the model is laid out over the launch's ranks as Megatron's
// --tensor-model-parallel-size / --pipeline-model-parallel-size: --tp N --pp M, and the other
// factor dp = world / (N * M) splits the windows and examples; the numbers are those of one
// rank (model/tasks/eval_tasks.h), printed by rank 0. The checkpoint may come from any layout.
// The libraries do the work: io/eval_text (text, detokenizer, LAMBADA splits), model/eval_tasks
// (windows, forward passes, metrics). Here: flags, the checkpoint's model and tokenizer, output.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/log.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "io/checkpoint.h"
#include "io/eval_text.h"
#include "io/tokenizer.h"
#include "model/stack/gpt.h"
#include "model/tasks/eval_tasks.h"
#include "model/train/checkpoint.h"
#include "model/train/family.h"
#include "model/train/train_config.h"
#include "nlohmann/json.hpp"
#include "parallel/grid.h"
#include "parallel/group_comm.h"
#include "parallel/launch_env.h"
#include "parallel/parallel_config.h"
#include "parallel/runtime.h"

namespace {

using json = nlohmann::json;
namespace model = anvil::model;
namespace io = anvil::io;
namespace parallel = anvil::parallel;

constexpr char kUsage[] =
    "usage: eval CKPT_DIR TASK... [options]\n"
    "tasks (one or more):\n"
    "  --data PREFIX        perplexity over the tokens of PREFIX.bin/.idx (documents in order)\n"
    "  --text FILE          WikiText-style perplexity (detokenized, tokenized whole)\n"
    "  --lambada FILE       LAMBADA accuracy (JSONL, one {\"text\": ...} per line)\n"
    "options:\n"
    "  --step N             the checkpoint of step N, an error when it is absent or broken\n"
    "                       (default: the one `latest` names, else the newest complete one)\n"
    "  --seq-len N          window length (default: the checkpoint's [data] seq_len)\n"
    "  --stride N           counted tokens per window after the first (Megatron's\n"
    "                       --overlapping-eval; default 32 for --text, seq_len for --data)\n"
    "  --detokenize NAME    --text's detokenizer: wikitext (default) | none\n"
    "  --strict-lambada     LAMBADA target = the whole last word (default: the last token)\n"
    "  --batch N            windows / examples per forward (default 8)\n"
    "  --device D           auto (default) | cpu | cuda\n"
    "  --tp N, --pp M       under mpirun / srun / torchrun: tensor and pipeline parallel\n"
    "                       sizes (default 1); the launch's other ranks split the data\n"
    "  --tokenizer-type T --vocab-file F [--merge-file F]\n"
    "                       a tokenizer instead of the one kept with the checkpoint\n"
    "  --json               also print the results as one JSON line (last line of stdout)\n";

struct Flags {
  std::string ckpt, data, text, lambada, detokenize = "wikitext", device = "auto";
  int64_t step = -1, seq_len = 0, stride = 0, batch = 8, tp = 1, pp = 1;
  bool strict = false, json = false;
  io::TokenizerOptions tokenizer;
};

// A command-line value quoted in a message: its first 64 bytes, then "..." (a value may be huge).
std::string cut_for_message(const std::string& v) {
  constexpr size_t kShown = 64;
  return v.size() <= kShown ? v : v.substr(0, kShown) + "...";
}

absl::StatusOr<Flags> parse_flags(int argc, char** argv) {
  Flags f;
  std::map<std::string, std::string*> strings = {{"--data", &f.data},
                                                 {"--text", &f.text},
                                                 {"--lambada", &f.lambada},
                                                 {"--detokenize", &f.detokenize},
                                                 {"--device", &f.device},
                                                 {"--tokenizer-type", &f.tokenizer.type},
                                                 {"--vocab-file", &f.tokenizer.vocab_file},
                                                 {"--merge-file", &f.tokenizer.merge_file}};
  std::map<std::string, int64_t*> ints = {{"--step", &f.step},     {"--seq-len", &f.seq_len},
                                          {"--stride", &f.stride}, {"--batch", &f.batch},
                                          {"--tp", &f.tp},         {"--pp", &f.pp}};
  std::set<std::string> given;  // a value given, even one equal to the "unset" default
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      return absl::CancelledError("help");
    } else if (a == "--strict-lambada") {
      f.strict = true;
    } else if (a == "--json") {
      f.json = true;
    } else if (strings.count(a) || ints.count(a)) {
      if (i + 1 >= argc) return absl::InvalidArgumentError(a + " needs a value");
      const std::string v = argv[++i];
      given.insert(a);
      if (strings.count(a)) {
        *strings[a] = v;
      } else if (!absl::SimpleAtoi(v, ints[a])) {
        return absl::InvalidArgumentError(
            absl::StrCat(a, " '", cut_for_message(v), "': expected an integer"));
      }
    } else if (a.rfind("-", 0) == 0) {
      return absl::InvalidArgumentError("unknown flag " + a);
    } else if (f.ckpt.empty()) {
      f.ckpt = a;
    } else {
      return absl::InvalidArgumentError("a second checkpoint directory " + a);
    }
  }
  if (f.ckpt.empty()) return absl::InvalidArgumentError("no checkpoint directory given");
  if (f.step < -1) return absl::InvalidArgumentError("--step must be a step number >= 0");
  if (f.data.empty() && f.text.empty() && f.lambada.empty()) {
    return absl::InvalidArgumentError("no task: give --data, --text and/or --lambada");
  }
  // 0 stands for "the default" inside Flags; given on the command line it is an error.
  for (const char* k : {"--seq-len", "--stride", "--batch"}) {
    if (given.count(k) && *ints[k] < 1) {
      return absl::InvalidArgumentError(absl::StrFormat("%s must be >= 1, got %d", k, *ints[k]));
    }
  }
  if (f.tp < 1 || f.pp < 1) return absl::InvalidArgumentError("--tp and --pp must be >= 1");
  return f;
}

// The tokenizer the flags name, else the checkpoint's [tokenizer] from the files kept with it.
absl::StatusOr<std::unique_ptr<io::Tokenizer>> checkpoint_tokenizer(
    const Flags& f, const io::Checkpoint& c, const model::TokenizerConfig& t) {
  if (!f.tokenizer.type.empty()) return io::make_tokenizer(f.tokenizer);
  if (t.type.empty()) {
    return absl::FailedPreconditionError(
        c.dir() +
        " records no [tokenizer]: give --tokenizer-type and --vocab-file (and "
        "--merge-file for GPT2BPE)");
  }
  auto kept = [&](const std::string& path) -> std::string {
    if (path.empty()) return "";
    std::string name = path.substr(path.find_last_of('/') + 1);
    if (t.type == "HF" && name.find(".json") == std::string::npos) name = "tokenizer.json";
    auto it = c.info().attachments.find("tokenizer/" + name);
    return it == c.info().attachments.end() ? path : it->second;  // else the original path
  };
  return io::make_tokenizer({t.type, kept(t.vocab_file), kept(t.merge_file)});
}

// A progress line on stderr at each further tenth of the work.
model::EvalProgress progress(const std::string& task, const char* unit) {
  return [task, unit, last = int64_t{0}](int64_t done, int64_t total) mutable {
    const int64_t tenth = done * 10 / total;
    if (tenth == last) return;
    last = tenth;
    std::fprintf(stderr, "eval: %s: %lld/%lld %s\n", task.c_str(), static_cast<long long>(done),
                 static_cast<long long>(total), unit);
  };
}

json lm_json(const model::LmReport& r, int64_t stride) {
  json j = {{"loss", r.loss},
            {"ppl", r.ppl},
            {"tokens", r.tokens},
            {"windows", r.windows},
            {"stride", stride}};
  if (r.words > 0) {
    j["words"] = r.words;
    j["adjusted_ppl"] = r.adjusted_ppl;
    j["token_ratio"] = r.token_ratio;
  }
  return j;
}

std::string lm_line(const std::string& what, const model::LmReport& r) {
  std::string s = absl::StrFormat("%s | loss %.4f | ppl %.4f", what, r.loss, r.ppl);
  if (r.words > 0) {
    absl::StrAppend(&s, absl::StrFormat(" | adjusted ppl %.4f (token ratio %.4f, %d words)",
                                        r.adjusted_ppl, r.token_ratio, r.words));
  }
  absl::StrAppend(&s, absl::StrFormat(" | %d tokens, %d windows", r.tokens, r.windows));
  return s;
}

// This rank's part of a --tp x --pp layout over the launch (dp = world / (tp * pp)): the
// model shard with its TP communicator, and the layout of the evaluation.
struct Layout {
  model::GptShard shard;
  model::EvalParallel par;
  std::vector<std::unique_ptr<parallel::Comm>> owned;  // NCCL communicators on CUDA
};

absl::StatusOr<std::unique_ptr<Layout>> make_layout(const Flags& f, const model::GptConfig& mc,
                                                    parallel::ParallelRuntime& rt, int rank,
                                                    bool cuda) {
  auto l = std::make_unique<Layout>();
  const parallel::ProcessGrid& grid = rt.grid();
  l->shard.tp = static_cast<int>(f.tp);
  l->shard.tp_rank = grid.tp_rank();
  ANVIL_ASSIGN_OR_RETURN(std::vector<std::vector<int64_t>> parts,
                         anvil::parallel::partition_layers(mc.n_layers, f.pp, "balanced"));
  l->shard.chunks = {parts[static_cast<size_t>(grid.pp_rank())]};
  l->shard.pre = grid.is_first_stage();
  l->shard.post = grid.is_last_stage();
  parallel::GroupComms& cpu = rt.comms();
  const parallel::CommOptions opt;
  parallel::Comm* pp_device = nullptr;
  if (f.tp > 1) {
    ANVIL_ASSIGN_OR_RETURN(l->shard.tp_comm,
                           anvil::parallel::group_comm(grid.tp_group(), cpu.tp.get(), rt.store(),
                                                       rank, cuda, opt, "", &l->owned));
  }
  if (f.pp > 1) {
    ANVIL_ASSIGN_OR_RETURN(
        pp_device, anvil::parallel::group_comm(grid.pp_group(), cpu.pp.get(), rt.store(), rank,
                                               cuda, opt, "", &l->owned));
  }
  ANVIL_RETURN_IF_ERROR(l->shard.validate(mc));
  l->par = model::eval_parallel(grid, cpu, pp_device);
  return l;
}

absl::Status run(const Flags& f) {
  ANVIL_ASSIGN_OR_RETURN(parallel::LaunchInfo launch,
                         parallel::launch_info_from_env(parallel::env_map(environ)));
  anvil::engine::set_process_rank(launch.rank);
  if (launch.world % (f.tp * f.pp) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--tp %d x --pp %d does not divide the launch's %d ranks", f.tp, f.pp, launch.world));
  }
  ANVIL_ASSIGN_OR_RETURN(
      std::unique_ptr<parallel::ParallelRuntime> rt,
      parallel::ParallelRuntime::start(launch, static_cast<int>(f.tp), static_cast<int>(f.pp),
                                       static_cast<int>(launch.world / (f.tp * f.pp)), {}));
  const bool rank0 = launch.rank == 0;
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c,
                         io::open_newest_complete(f.ckpt, f.step, [&](const std::string& w) {
                           if (rank0) std::fprintf(stderr, "eval: warning: %s\n", w.c_str());
                         }));
  // The saved config parses against the world it was saved from; the model takes --tp, --pp.
  int world = 1;
  for (const char* k : {"tp", "pp", "dp"}) {
    auto it = c.info().layout.find(k);
    if (it != c.info().layout.end()) world *= static_cast<int>(it->second);
  }
  ANVIL_ASSIGN_OR_RETURN(
      model::TrainConfig cfg,
      model::load_train_config_string(c.info().config, c.dir() + "/manifest.json (config)", {},
                                      nullptr, world));
  // The checkpoint's family, looked up once: a causal LM runs here.
  ANVIL_RETURN_IF_ERROR(model::check_causal_lm(model::family_of(cfg)));
  model::GptConfig mc = cfg.model;
  // Megatron's make-vocab-size-divisible-by x TP (the checkpoint has no padding rows), unless
  // the loss spanned them (vocab_padding_in_loss): then they are saved and their count is kept.
  mc.vocab_multiple = 128 * f.tp;
  ANVIL_RETURN_IF_ERROR(
      model::adopt_vocab_padding(c.info().model, static_cast<int>(f.tp), c.dir(), mc));
  const int64_t T = f.seq_len > 0 ? f.seq_len : cfg.data.seq_len;
  if (T > mc.max_seq_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "--seq-len %d exceeds the model's [model] max_seq_len %d", T, mc.max_seq_len));
  }
  ANVIL_ASSIGN_OR_RETURN(model::Precision prec, model::resolve_precision(f.device));
  // --data reads token ids: only --text and --lambada (or tokenizer flags) need a tokenizer.
  std::unique_ptr<io::Tokenizer> tok;
  if (!f.text.empty() || !f.lambada.empty() || !f.tokenizer.type.empty()) {
    ANVIL_ASSIGN_OR_RETURN(tok, checkpoint_tokenizer(f, c, cfg.tokenizer));
  }
  if (tok && tok->vocab_size() > mc.vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the tokenizer (%s) has %d tokens, more than the model's [model] vocab_size %d",
        tok->name(), tok->vocab_size(), mc.vocab_size));
  }
  const int32_t pad = static_cast<int32_t>(cfg.data.eod_token);  // Megatron pads with eod
  const model::GptRunShape shape{f.batch, T};
  const bool cuda = prec.device == anvil::engine::Device::kCuda;
  anvil::engine::Stream stream = anvil::engine::Stream::cpu();
  if (cuda) {
    ANVIL_ASSIGN_OR_RETURN(stream, anvil::engine::Stream::cuda(launch.local_rank %
                                                               anvil::engine::cuda_device_count()));
  }
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<Layout> layout,
                         make_layout(f, mc, *rt, launch.rank, cuda));
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<model::GptModel> m,
                         model::GptModel::create(mc, shape, prec, /*seed=*/0, layout->shard));
  ANVIL_RETURN_IF_ERROR(model::gpt_load_checkpoint(
      *m, [&](const std::string& name) { return c.read(name); }, /*weights_only=*/true, stream));
  const model::EvalParallel& par = layout->par;
  // Rank 0 prints; the others compute their part.
  auto print = [rank0](const std::string& line) {
    if (rank0) std::printf("%s\n", line.c_str());
  };
  auto progress_of = [rank0](const std::string& task, const char* unit) {
    return rank0 ? progress(task, unit) : model::EvalProgress();
  };
  print(absl::StrFormat(
      "checkpoint %s (step %d): GPT %d layers, d_model %d, vocab %d; %s; tokenizer %s; seq_len "
      "%d, batch %d; tp %d, pp %d, dp %d",
      c.dir(), c.info().step, mc.n_layers, mc.d_model, mc.vocab_size,
      cuda ? "cuda (bf16)" : "cpu (f32)", tok ? tok->name() : "none (token ids)", T, f.batch, f.tp,
      f.pp, par.dp));
  json out = {{"checkpoint", c.dir()},
              {"step", c.info().step},
              {"seq_len", T},
              {"device", cuda ? "cuda" : "cpu"},
              {"tp", f.tp},
              {"pp", f.pp},
              {"dp", par.dp}};

  if (!f.data.empty()) {
    ANVIL_ASSIGN_OR_RETURN(std::vector<int32_t> tokens, io::read_all_tokens(f.data));
    const int64_t stride = f.stride > 0 ? f.stride : T;
    ANVIL_ASSIGN_OR_RETURN(model::LmEvalResult r,
                           model::evaluate_lm(*m, shape, tokens, stride, pad, stream, par,
                                              progress_of("data", "windows")));
    const model::LmReport rep = model::lm_report(r, 0);
    print(lm_line("data " + f.data, rep));
    out["data"] = lm_json(rep, stride);
    out["data"]["path"] = f.data;
  }
  if (!f.text.empty()) {
    ANVIL_ASSIGN_OR_RETURN(io::Detokenizer d, io::parse_detokenizer(f.detokenize));
    ANVIL_ASSIGN_OR_RETURN(io::EvalText text, io::load_eval_text(f.text, *tok, d));
    const int64_t stride = f.stride > 0 ? f.stride : std::min<int64_t>(32, T);
    if (rank0) {
      std::fprintf(stderr, "eval: text %s: %lld words, %lld tokens (%s detokenizer), stride %lld\n",
                   f.text.c_str(), static_cast<long long>(text.words),
                   static_cast<long long>(text.tokens.size()), f.detokenize.c_str(),
                   static_cast<long long>(stride));
    }
    ANVIL_ASSIGN_OR_RETURN(model::LmEvalResult r,
                           model::evaluate_lm(*m, shape, text.tokens, stride, pad, stream, par,
                                              progress_of("text", "windows")));
    const model::LmReport rep = model::lm_report(r, text.words);
    print(lm_line("text " + f.text, rep));
    out["text"] = lm_json(rep, stride);
    out["text"]["path"] = f.text;
    out["text"]["detokenizer"] = f.detokenize;
  }
  if (!f.lambada.empty()) {
    ANVIL_ASSIGN_OR_RETURN(std::vector<io::LambadaExample> ex,
                           io::load_lambada(f.lambada, *tok, f.strict));
    std::vector<model::ClozeExample> examples;
    for (io::LambadaExample& e : ex) {
      examples.push_back({std::move(e.context), std::move(e.target)});
    }
    ANVIL_ASSIGN_OR_RETURN(model::ClozeResult r,
                           model::evaluate_cloze(*m, shape, examples, pad, stream, par,
                                                 progress_of("lambada", "examples")));
    const double target_loss = r.target_loss_sum / static_cast<double>(r.target_tokens);
    print(absl::StrFormat(
        "lambada %s | accuracy %.4f (%d/%d) | target loss %.4f (ppl %.4f) | %s | truncated %d",
        f.lambada, r.accuracy(), r.correct, r.total, target_loss, std::exp(target_loss),
        f.strict ? "strict" : "non-strict", r.truncated));
    out["lambada"] = {{"path", f.lambada},          {"accuracy", r.accuracy()},
                      {"correct", r.correct},       {"total", r.total},
                      {"target_loss", target_loss}, {"target_tokens", r.target_tokens},
                      {"strict", f.strict},         {"truncated", r.truncated}};
  }
  if (f.json) print(out.dump());
  stream.synchronize();  // transfers in flight use the model's buffers: done before they go
  return absl::OkStatus();
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<Flags> f = parse_flags(argc, argv);
  if (absl::IsCancelled(f.status())) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (!f.ok()) {
    std::fprintf(stderr, "eval: error: %s\n%s", std::string(f.status().message()).c_str(), kUsage);
    return 2;
  }
  const absl::Status s = run(*f);
  if (!s.ok()) {
    std::fprintf(stderr, "eval: error: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
