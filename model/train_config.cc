// bin/train's ini schema and its parsing/validation into TrainConfig (see train_config.h).
#include "model/train_config.h"

#include <cmath>
#include <filesystem>
#include <string_view>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "engine/checked_math.h"
#include "engine/device.h"
#include "engine/status.h"
#include "model/gpt_arch_config.h"

namespace anvil::model {
namespace {

using engine::Config;
using engine::ConfigSchema;
using engine::ConfigType;

constexpr char kDimensionLimit[] =
    "2^31 - 1 = 2147483647 (token ids, positions and dimensions are int32)";
constexpr double kMaxLr = 10.0;  // [optim] lr: larger is a typo or a unit mistake

ConfigSchema build_schema() {
  ConfigSchema s;
  const ConfigType kInt = ConfigType::kInt, kFloat = ConfigType::kFloat, kBool = ConfigType::kBool,
                   kString = ConfigType::kString;
  // [model]: GPT-2 shapes (Megatron flag names in parentheses where they differ).
  s.add("model", "vocab_size", kInt, "50257",
        "Real vocabulary size: token ids are < vocab_size (GPT-2 BPE: 50257; byte-level: 257).");
  s.add("model", "padded_vocab", kInt, "0",
        "Embedding rows incl. padding; 0 = vocab_size rounded up to a multiple of 128 "
        "(--make-vocab-size-divisible-by 128).");
  s.add("model", "max_seq_len", kInt, "1024",
        "Rows of the learned position embedding (--max-position-embeddings).");
  s.add("model", "d_model", kInt, "768", "Hidden size (--hidden-size).");
  s.add("model", "n_heads", kInt, "12",
        "Attention heads (--num-attention-heads); must divide d_model.");
  s.add("model", "n_layers", kInt, "12", "Transformer layers (--num-layers).");
  s.add("model", "ffn_hidden", kInt, "0", "MLP hidden size (--ffn-hidden-size); 0 = 4 * d_model.");
  s.add("model", "hidden_dropout", kFloat, "0.0",
        "Dropout after the attention and MLP output projections, in [0, 1) (Megatron's default "
        "is 0.1).");
  s.add("model", "attention_dropout", kFloat, "0.0",
        "Dropout on the attention probabilities, in [0, 1) (Megatron's default is 0.1).");
  s.add("model", "ln_eps", kFloat, "1e-5", "LayerNorm epsilon (--layernorm-epsilon).");
  s.add("model", "init_std", kFloat, "0.02",
        "Std of the normal parameter init (--init-method-std); residual output projections use "
        "init_std / sqrt(2 * n_layers).");
  add_gpt_arch_schema(s);
  // [data]
  s.add("data", "paths", kString, "",
        "The tokenized data (--data-path): one prefix PATH of PATH.bin + PATH.idx (Megatron mmap "
        "format, written by bin/preprocess), or weighted prefixes to blend, \"0.7 a_text_document "
        "0.3 b_text_document\" (weights need not sum to 1). Relative paths are resolved against "
        "the current working directory, not the ini file's directory.");
  s.add("data", "path", kString, "", "Alias of paths (set one of the two).");
  s.add_alias("data", "path", "paths");
  s.add("data", "split", kString, "969,30,1",
        "Train, validation, test weights over each dataset's sequences (--split), separated by "
        "',' or '/'.");
  s.add("data", "valid_paths", kString, "",
        "A separate validation set, same syntax as paths (--valid-data-path): all of its "
        "sequences are used for validation instead of the validation split of paths.");
  s.add("data", "train_weighted_split_paths", kString, "",
        "The training data as one named group (--train-weighted-split-paths, BigScience fork): "
        "\"NAME: W1 START1:END1 PREFIX1, W2 START2:END2 PREFIX2\", the datasets blended by "
        "weight, each over the sequences round(START * n) .. round(END * n) of its n; replaces "
        "paths and split (Megatron's data loading mode 2: both must stay unset). NAME names the "
        "index caches. Empty = paths.");
  s.add("data", "valid_weighted_split_paths", kString, "",
        "Named validation groups, same syntax, several separated by ';' "
        "(--valid-weighted-split-paths): each is evaluated separately and logged as \"NAME "
        "loss\", on its own stream of Megatron's validation sample counts. Unlike Megatron, "
        "also allowed with paths (they replace its validation split); excludes valid_paths. "
        "Empty = the validation split (or valid_paths).");
  s.add("data", "test_weighted_split_paths", kString, "",
        "Named test groups, same syntax (--test-weighted-split-paths), each evaluated once at "
        "the end. Empty = the test split.");
  s.add("data", "seq_len", kInt, "1024",
        "Tokens per sample T (--seq-length); <= [model] max_seq_len.");
  s.add("data", "seed", kInt, "1234",
        "Seed of the document and sample shuffles (--seed), in [0, 2^32). Samples and their "
        "order are Megatron's for the same data, split, seq_len, seed and sample counts.");
  s.add("data", "cache_dir", kString, "",
        "Directory of the index caches (--data-cache-path); empty = next to the data, named "
        "as Megatron names them (PREFIX_train_indexmap_*ns_*sl_*s_{doc,sample,shuffle}_idx.npy), "
        "so Megatron's and anvil's caches are interchangeable.");
  s.add("data", "last_epoch_cutoff", kFloat, "0.95",
        "When a split needs E > 1 epochs and the last one contributes fewer than "
        "int(cutoff * samples per epoch) samples, the last epoch is shuffled separately "
        "(_build_index_mappings' cutoff_last_epoch: 0.95 in the BigScience fork, 0.80 in "
        "NVIDIA Megatron-LM), in (0, 1]. A value other than 0.95 adds _{cutoff}lec to the "
        "index cache names (Megatron's names do not hold it).");
  s.add("data", "eod_token", kInt, "50256",
        "End-of-document token id, used by eod_mask_loss and reset_position_ids (GPT-2 BPE: "
        "50256; byte-level data: 256).");
  s.add("data", "eod_mask_loss", kBool, "false",
        "--eod-mask-loss: no loss where the input token is eod_token (the prediction of the "
        "first token of the next document); the loss is the mean over the remaining tokens.");
  s.add("data", "reset_position_ids", kBool, "false",
        "--reset-position-ids: position ids restart at 0 after every eod_token.");
  s.add("data", "reset_attention_mask", kBool, "false",
        "--reset-attention-mask: tokens attend only to earlier tokens of their own document "
        "(documents end at eod_token).");
  // [train]
  s.add("train", "micro_batch", kInt, "8", "Samples per forward/backward (--micro-batch-size).");
  s.add("train", "global_batch", kInt, "0",
        "Samples per optimizer step (--global-batch-size); a multiple of micro_batch, the "
        "quotient is the number of gradient accumulation steps. 0 = micro_batch.");
  s.add("train", "steps", kInt, "1000",
        "Optimizer steps (--train-iters). Set train_samples or train_tokens instead for a "
        "sample- or token-based run (then steps must stay unset).");
  s.add("train", "train_samples", kInt, "0",
        "Samples to train on (--train-samples); 0 = steps * global_batch. The steps follow as "
        "Megatron's update_train_iters computes them (train_samples // global_batch, with "
        "rampup_batch_size the ramp-up's steps plus the rest // global_batch; a partial last "
        "batch is dropped), and the train split is sized for train_samples.");
  s.add("train", "train_tokens", kInt, "0",
        "Tokens to train on (--train-tokens): the run stops after the step at which consumed "
        "samples * seq_len reaches it (the Microsoft fork's loop condition; the BigScience "
        "fork parses the flag but ignores it). With train_samples the earlier end wins; 0 = "
        "off.");
  s.add("train", "rampup_batch_size", kString, "",
        "Global batch ramp-up \"START INCREMENT SAMPLES\" (--rampup-batch-size): the global "
        "batch starts at START and grows by INCREMENT (n = (global_batch - START) / INCREMENT "
        "times) every SAMPLES / n consumed samples, up to global_batch once SAMPLES are "
        "consumed; the data sampler advances by each step's batch and the lr schedule by the "
        "samples of each applied step. START and INCREMENT must be multiples of micro_batch * "
        "dp. Megatron allows it with sample-based runs only; here steps work too. Empty = off.");
  s.add("train", "skip_iterations", kString, "",
        "Steps whose data is consumed but not trained on, \"A-B C-D\" (1-based, inclusive, "
        "overlaps merged; --skip-train-iteration-range). Each such step advances the step "
        "counter and the data position by its global batch, without forward, backward, "
        "optimizer or lr schedule step. (The BigScience fork instead keeps its iteration "
        "counter and draws one micro-batch per skipped iteration; NVIDIA Megatron-LM's "
        "--iterations-to-skip does what anvil does.) Empty = none.");
  s.add("train", "seed", kInt, "1234", "Seed of the parameter init and of dropout (--seed).");
  s.add("train", "device", kString, "auto",
        "auto = CUDA (bf16 activations, f32 gradients and optimizer) when a GPU is visible, else "
        "CPU (f32).",
        {"auto", "cpu", "cuda"});
  s.add("train", "eval_interval", kInt, "1000",
        "Evaluate on the validation split every N steps and at the end (--eval-interval); a "
        "run whose last step is a multiple of N evaluates twice there, on fresh samples each "
        "time, as Megatron does. 0 = only at the end.");
  s.add("train", "eval_iters", kInt, "100",
        "Validation iterations per evaluation (--eval-iters), each of one global batch (the "
        "current one under rampup_batch_size), as Megatron. Each evaluation reads the next "
        "samples of the validation stream (Megatron's validation iterator continues over the "
        "evaluations, and resumes from the checkpoint's consumed validation samples); the "
        "evaluation before the first step reads the samples the first periodic one will read "
        "without consuming them (Megatron has none). At the end of the run the test split is "
        "evaluated once (eval_iters global batches from its start: Megatron's 'lm loss' of "
        "the test data). A stream read past the end of its split (a resumed run with more "
        "evaluations than it was sized for) wraps around with a warning, where Megatron's "
        "sampler asserts. 0 = no evaluation.");
  s.add("train", "log_interval", kInt, "100", "Log a progress line every N steps.");
  s.add("train", "max_skipped_steps", kInt, "10",
        "Stop the run with an error (non-zero exit, no final checkpoint) after this many "
        "consecutive skipped steps: a step is skipped when its gradient norm is not finite, and "
        "a run that skips step after step has diverged; 0 = never stop.");
  s.add("train", "check_memory", kBool, "true",
        "Refuse to start when the memory plan of a rank exceeds the memory available to it: "
        "MemAvailable of /proc/meminfo on the CPU (also for the plans of one host's ranks "
        "together), the free bytes of the GPU on CUDA. false = allocate anyway (the CPU run may "
        "then be killed by the kernel's OOM killer).");
  // [optim]: AdamW with Megatron's AnnealingLR schedule.
  s.add("optim", "lr", kFloat, "3e-4",
        "Peak learning rate, reached at the end of warmup; in (0, 10].");
  s.add("optim", "min_lr", kFloat, "0.0", "Learning rate at the end of the decay; <= lr.");
  s.add("optim", "warmup_steps", kInt, "0",
        "Linear warmup from 0 to lr over this many steps (--lr-warmup-iters). The schedule "
        "counts samples, as Megatron's: warmup_steps * global_batch samples. The first step "
        "uses the lr of position 0 (0 during a warmup), step k the lr after the k - 1 applied "
        "steps before it; a skipped step does not advance the schedule.");
  s.add("optim", "warmup_samples", kInt, "0",
        "Warmup over this many samples instead (--lr-warmup-samples); 0 = use warmup_steps.");
  s.add("optim", "warmup_tokens", kInt, "0",
        "Warmup over this many tokens instead: warmup_samples = ceil(warmup_tokens / [data] "
        "seq_len) (not a Megatron flag: the BigScience fork's warmup is sample-based); 0 = off.");
  s.add("optim", "warmup_fraction", kFloat, "0.0",
        "Warmup over this fraction of the decay instead (--lr-warmup-fraction), in [0, 1]; 0 = "
        "off.");
  s.add("optim", "decay_style", kString, "cosine",
        "Decay from lr to min_lr between warmup_steps and decay_steps, constant afterwards "
        "(--lr-decay-style; Megatron's default is linear).",
        {"cosine", "linear", "constant"});
  s.add("optim", "decay_steps", kInt, "0",
        "Step at which the decay ends, counted from step 0 (--lr-decay-iters): decay_steps * "
        "global_batch samples; 0 = [train] steps (or train_samples when that is set).");
  s.add("optim", "decay_samples", kInt, "0",
        "Sample at which the decay ends instead (--lr-decay-samples); 0 = use decay_steps.");
  s.add("optim", "decay_tokens", kInt, "0",
        "Token-based decay (--lr-decay-tokens, BigScience fork): after the warmup the decay "
        "ratio is (tokens - warmup end's tokens) / (decay_tokens - warmup end's tokens), "
        "where tokens are those consumed before the previous step (Megatron's "
        "consumed_train_tokens when the scheduler steps); min_lr beyond decay_tokens. 0 = off.");
  s.add("optim", "weight_decay", kFloat, "0.01",
        "AdamW decoupled weight decay; not applied to biases and LayerNorm parameters.");
  s.add("optim", "beta1", kFloat, "0.9", "AdamW beta1 (--adam-beta1).");
  s.add("optim", "beta2", kFloat, "0.999", "AdamW beta2 (--adam-beta2; GPT-3 used 0.95).");
  s.add("optim", "eps", kFloat, "1e-8", "AdamW epsilon (--adam-eps).");
  s.add("optim", "clip_grad", kFloat, "1.0",
        "Clip the global L2 norm of the gradient to this value (--clip-grad); 0 = no clipping.");
  // [tokenizer]
  s.add("tokenizer", "type", kString, "",
        "The tokenizer the data was made with (bin/preprocess --tokenizer-type); empty = none. "
        "When set, [model] vocab_size and [data] eod_token default to its values (explicit "
        "values must agree) and checkpoints keep its files.",
        {"", "GPT2BPE", "BertWordPieceLowerCase", "BertWordPieceCase", "SentencePiece", "HF",
         "Byte"});
  s.add("tokenizer", "vocab_file", kString, "",
        "encoder.json / vocab.json (GPT2BPE), vocab.txt (WordPiece), .model (SentencePiece), "
        "tokenizer.json (HF).");
  s.add("tokenizer", "merge_file", kString, "", "merges.txt / vocab.bpe (GPT2BPE).");
  // [checkpoint]: docs/checkpoints.md
  s.add("checkpoint", "save", kString, "",
        "Directory to save checkpoints into (--save): DIR/step_XXXXXXXX/ and DIR/latest; empty "
        "= no saving. Saved every save_interval steps, at the end, on SIGTERM/SIGUSR1/a first "
        "Ctrl-C and at the exit limits.");
  s.add("checkpoint", "save_interval", kInt, "0",
        "Save every N steps (--save-interval); 0 = only at the end and when exiting early.");
  s.add("checkpoint", "keep_last", kInt, "0",
        "After a successful save, delete all but the newest K complete checkpoints; 0 = keep "
        "all.");
  s.add("checkpoint", "load", kString, "",
        "Directory to resume from (--load): the checkpoint `latest` names (or load_step); a "
        "broken one is refused and the newest complete earlier one used. Empty = start from "
        "scratch; a directory without checkpoints starts from scratch with a warning.");
  s.add("checkpoint", "load_step", kInt, "-1",
        "Step of the checkpoint to load; -1 = the one DIR/latest names.");
  s.add("checkpoint", "finetune", kBool, "false",
        "Load the weights only (--finetune): fresh AdamW state, step 0, any batch size and seed.");
  s.add("checkpoint", "exit_interval", kInt, "0",
        "Save and exit (status 0) after a step that is a multiple of N (--exit-interval); 0 = "
        "off.");
  s.add("checkpoint", "exit_duration_min", kFloat, "0",
        "Save and exit (status 0) after the first step that ends this many wall-clock minutes "
        "after the start (--exit-duration-in-mins); 0 = off.");
  // [log]
  s.add("log", "all_ranks", kBool, "false",
        "Print info lines on every rank, not only rank 0 (warnings always print everywhere).");
  s.add("log", "tensorboard_dir", kString, "",
        "Write TensorBoard event files into this directory (--tensorboard-dir), created when "
        "missing, from the last rank as Megatron: Megatron-DeepSpeed's scalar names "
        "(lm-loss-training/lm loss, learning-rate/learning-rate, grad-norm/grad-norm, "
        "lm-loss-validation/lm loss validation, iteration-time/..., each also vs samples and "
        "vs tokens: docs/tensorboard.md). Empty = none.");
  s.add("log", "tensorboard_log_interval", kInt, "1",
        "Write the per-step scalars (loss, learning rate, grad norm, batch size) every N steps "
        "(--tensorboard-log-interval); throughput and memory are written every [train] "
        "log_interval steps, when the file is also flushed.");
  // [parallel]: model/parallel_config.cc
  add_parallel_schema(s);
  // [eval]: model/eval_config.cc; [finetune]: model/finetune_config.cc
  add_eval_schema(s);
  add_finetune_schema(s);
  return s;
}

// Small helpers that turn a failed range check into Config::error("[s] k: <what>").
absl::Status need(bool ok, const Config& c, std::string_view sec, std::string_view key,
                  const std::string& what) {
  return ok ? absl::OkStatus() : c.error(sec, key, what);
}

absl::Status positive(const Config& c, std::string_view sec, std::string_view key) {
  const int64_t v = c.get_int(sec, key);
  return need(v > 0, c, sec, key, absl::StrFormat("must be > 0, got %d", v));
}

absl::Status non_negative(const Config& c, std::string_view sec, std::string_view key) {
  const int64_t v = c.get_int(sec, key);
  return need(v >= 0, c, sec, key, absl::StrFormat("must be >= 0, got %d", v));
}

// v <= limit; `limit_text` is the limit as the message shows it ("2^16 = 65536").
absl::Status at_most(const Config& c, std::string_view sec, std::string_view key, int64_t limit,
                     const char* limit_text) {
  const int64_t v = c.get_int(sec, key);
  return need(v <= limit, c, sec, key, absl::StrFormat("%d exceeds the limit %s", v, limit_text));
}

absl::Status probability(const Config& c, std::string_view sec, std::string_view key) {
  const double v = c.get_float(sec, key);
  return need(v >= 0.0 && v < 1.0, c, sec, key, absl::StrFormat("must be in [0, 1), got %g", v));
}

absl::Status positive_float(const Config& c, std::string_view sec, std::string_view key) {
  const double v = c.get_float(sec, key);
  return need(v > 0.0 && std::isfinite(v), c, sec, key, absl::StrFormat("must be > 0, got %g", v));
}

// "969,30,1" or "969/30/1": 1 to 3 non-negative weights with a positive sum (Megatron pads a
// shorter list with zeros).
absl::Status check_split(const Config& c) {
  const std::string split = c.get_string("data", "split");
  std::vector<std::string> parts = absl::StrSplit(split, absl::ByAnyChar(",/"));
  double sum = 0.0;
  bool ok = !parts.empty() && parts.size() <= 3;
  for (const std::string& p : parts) {
    double w = 0.0;
    if (!absl::SimpleAtod(absl::StripAsciiWhitespace(p), &w) || !(w >= 0.0) || !std::isfinite(w)) {
      ok = false;
      break;
    }
    sum += w;
  }
  return need(ok && sum > 0.0, c, "data", "split",
              absl::StrFormat("expected up to 3 non-negative weights like \"969,30,1\" with a "
                              "positive sum, got \"%s\"",
                              split));
}

// [data] paths syntax (Megatron's --data-path): "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ...".
absl::Status parse_data_paths(const Config& c, std::string_view key, const std::string& text,
                              std::vector<DataSource>* sources, bool* weighted) {
  std::vector<std::string> words = absl::StrSplit(text, ' ', absl::SkipWhitespace());
  sources->clear();
  *weighted = words.size() > 1;
  if (words.size() == 1) {
    sources->push_back(DataSource{1.0, words[0]});
    return absl::OkStatus();
  }
  if (words.size() % 2 != 0) {
    return c.error("data", key,
                   absl::StrFormat("expected one prefix or weight/prefix pairs like \"0.7 "
                                   "a_text_document 0.3 b_text_document\", got %d words",
                                   words.size()));
  }
  double sum = 0.0;
  for (size_t i = 0; i < words.size(); i += 2) {
    double w = 0.0;
    if (!absl::SimpleAtod(words[i], &w) || !(w >= 0.0) || !std::isfinite(w)) {
      return c.error("data", key,
                     absl::StrFormat("weight \"%s\" (before %s) is not a non-negative number",
                                     words[i], words[i + 1]));
    }
    sum += w;
    sources->push_back(DataSource{w, words[i + 1]});
  }
  if (sources->size() >= 255) {
    return c.error("data", key,
                   absl::StrFormat("%d datasets; at most 254 can be blended", sources->size()));
  }
  return need(sum > 0.0, c, "data", key, "the weights sum to 0");
}

}  // namespace

const ConfigSchema& train_config_schema() {
  static const ConfigSchema* schema = new ConfigSchema(build_schema());
  return *schema;
}

// [data] *_weighted_split_paths: Megatron's mode 2 excludes paths and split for the training
// group; validation groups exclude valid_paths.
absl::Status parse_groups(const Config& c, DataConfig* d) {
  const struct {
    const char* key;
    std::vector<DataGroup>* out;
  } lists[] = {{"train_weighted_split_paths", &d->train_groups},
               {"valid_weighted_split_paths", &d->valid_groups},
               {"test_weighted_split_paths", &d->test_groups}};
  for (const auto& l : lists) {
    absl::StatusOr<std::vector<DataGroup>> g = parse_data_groups(c.get_string("data", l.key));
    if (!g.ok()) return c.error("data", l.key, std::string(g.status().message()));
    *l.out = std::move(*g);
  }
  ANVIL_RETURN_IF_ERROR(need(d->train_groups.size() <= 1, c, "data", "train_weighted_split_paths",
                             "holds more than one group (training uses one)"));
  if (!d->train_groups.empty()) {
    ANVIL_RETURN_IF_ERROR(need(d->sources.empty() && c.origin("data", "split") == "default", c,
                               "data", "train_weighted_split_paths",
                               "excludes [data] paths and split (Megatron's data loading modes "
                               "1 and 2 are exclusive)"));
  }
  ANVIL_RETURN_IF_ERROR(need(d->valid_groups.empty() || d->valid_sources.empty(), c, "data",
                             "valid_weighted_split_paths", "excludes [data] valid_paths"));
  return absl::OkStatus();
}

// [train] steps from train_samples / train_tokens (Megatron's update_train_iters; the earlier
// end wins), the ramp-up (checked against micro_batch here, against micro_batch * dp after
// [parallel]) and the skipped ranges.
absl::Status resolve_run_length(const Config& c, int64_t seq_len, LoopConfig* l) {
  for (const char* key : {"train_samples", "train_tokens"}) {
    ANVIL_RETURN_IF_ERROR(non_negative(c, "train", key));
  }
  ANVIL_RETURN_IF_ERROR(
      at_most(c, "train", "train_samples", engine::kMaxSamples, "2^40 = 1099511627776"));
  l->train_samples = c.get_int("train", "train_samples");
  l->train_tokens = c.get_int("train", "train_tokens");
  absl::StatusOr<BatchRampup> rampup = parse_batch_rampup(
      c.get_string("train", "rampup_batch_size"), l->global_batch, l->micro_batch);
  if (!rampup.ok())
    return c.error("train", "rampup_batch_size", std::string(rampup.status().message()));
  l->rampup = *rampup;
  absl::StatusOr<StepRanges> skips = parse_step_ranges(c.get_string("train", "skip_iterations"));
  if (!skips.ok())
    return c.error("train", "skip_iterations", std::string(skips.status().message()));
  l->skip_ranges = *skips;
  const bool steps_given = c.origin("train", "steps") != "default";
  ANVIL_RETURN_IF_ERROR(need(!(steps_given && l->train_samples > 0), c, "train", "train_samples",
                             "and [train] steps are both set: a run is iteration- or "
                             "sample-based (Megatron's --train-iters or --train-samples)"));
  if (l->train_samples > 0) {
    l->steps = steps_for_samples(l->rampup, l->global_batch, l->train_samples);
    ANVIL_RETURN_IF_ERROR(
        need(l->steps > 0, c, "train", "train_samples",
             absl::StrFormat("%d samples make %d steps at [train] global_batch %d",
                             l->train_samples, l->steps, l->global_batch)));
  }
  if (l->train_tokens > 0) {
    const int64_t steps = steps_for_tokens(l->rampup, l->global_batch, seq_len, l->train_tokens);
    l->steps = steps_given || l->train_samples > 0 ? std::min(l->steps, steps) : steps;
    ANVIL_RETURN_IF_ERROR(at_most(c, "train", "steps", engine::kMaxSamples, "2^40"));
  }
  return absl::OkStatus();
}

// [optim]'s warmup and decay, in steps, samples, tokens or a fraction (one of each), into the
// schedule; the decay ends by default with the run (train_samples or steps).
absl::Status resolve_lr_schedule(const Config& c, const LoopConfig& l, int64_t seq_len,
                                 LrSchedule* lr) {
  for (const char* key : {"warmup_steps", "warmup_samples", "warmup_tokens", "decay_steps",
                          "decay_samples", "decay_tokens"}) {
    ANVIL_RETURN_IF_ERROR(non_negative(c, "optim", key));
  }
  lr->warmup_steps = c.get_int("optim", "warmup_steps");
  lr->warmup_samples = c.get_int("optim", "warmup_samples");
  const int64_t warmup_tokens = c.get_int("optim", "warmup_tokens");
  lr->warmup_fraction = c.get_float("optim", "warmup_fraction");
  lr->decay_steps = c.get_int("optim", "decay_steps");
  lr->decay_samples = c.get_int("optim", "decay_samples");
  lr->decay_tokens = c.get_int("optim", "decay_tokens");
  ANVIL_RETURN_IF_ERROR(need(lr->warmup_fraction >= 0.0 && lr->warmup_fraction <= 1.0, c, "optim",
                             "warmup_fraction",
                             absl::StrFormat("must be in [0, 1], got %g", lr->warmup_fraction)));
  const int warmups = (lr->warmup_steps > 0) + (lr->warmup_samples > 0) + (warmup_tokens > 0) +
                      (lr->warmup_fraction > 0.0);
  ANVIL_RETURN_IF_ERROR(need(warmups <= 1, c, "optim", "warmup_steps",
                             "set at most one of warmup_steps, warmup_samples, warmup_tokens and "
                             "warmup_fraction"));
  ANVIL_RETURN_IF_ERROR(need(lr->decay_steps == 0 || lr->decay_samples == 0, c, "optim",
                             "decay_steps", "set at most one of decay_steps and decay_samples"));
  if (warmup_tokens > 0) lr->warmup_samples = (warmup_tokens + seq_len - 1) / seq_len;
  if (lr->decay_steps == 0 && lr->decay_samples == 0) {
    if (l.train_samples > 0) {
      lr->decay_samples = l.train_samples;
    } else {
      lr->decay_steps = l.steps;
    }
  }
  ANVIL_ASSIGN_OR_RETURN(lr->style, parse_decay_style(c.get_string("optim", "decay_style")));
  if (absl::Status s = lr->validate(l.global_batch); !s.ok()) {
    return c.error("optim", "warmup_steps",
                   absl::StrCat(s.message(),
                                " ([optim] decay_steps / decay_samples 0 = the run's "
                                "end)"));
  }
  return absl::OkStatus();
}

std::string config_docs_markdown() {
  return absl::StrCat(
      "# bin/train configuration\n\n"
      "<!-- Generated by `build/bin/train --print-config-docs > docs/config.md` from the schema\n"
      "     in model/train_config.cc; tests/model/train_config_test.cc fails when they differ. "
      "-->\n"
      "\n"
      "`bin/train` reads one ini file (see `configs/`). Sections and keys follow Megatron-LM's\n"
      "flags where one exists (named in parentheses). Every key is typed and has a default; an\n"
      "unknown section or key, a value of the wrong type or an inconsistent combination is an\n"
      "error naming the file, line and key. Any key can be overridden on the command line:\n"
      "\n"
      "```\n"
      "build/bin/train configs/tiny_cpu.ini train.steps=100 optim.lr=1e-3 [--dry-run]\n"
      "```\n"
      "\n"
      "`--dry-run` prints the model size and the memory plan and exits; `--print-device` prints\n"
      "the device `device = auto` resolves to. The effective configuration (every key, defaults\n"
      "included) is printed at start-up.\n"
      "\n"
      "Batch arithmetic: one optimizer step consumes `global_batch` samples of `seq_len` tokens,\n"
      "in `global_batch / micro_batch` forward/backward passes (gradient accumulation).\n"
      "Learning rate (Megatron's AnnealingLR, counted in samples): step s (counted from 1) of a\n"
      "run at a constant global batch with no skipped steps uses `lr * (s - 1) / warmup_steps`\n"
      "during warmup (0 at the first step, as Megatron), then the decay from `lr` to `min_lr`\n"
      "ending at `decay_steps`, then `min_lr`. A skipped step (non-finite gradient norm) keeps\n"
      "the lr where it is: Megatron's fp16 loss-scaler path does so; its bf16/fp32 path has no\n"
      "such check and applies the non-finite update, which anvil never does.\n"
      "\n"
      "Data: Megatron's GPT dataset, exactly. Each dataset's sequences are split into train,\n"
      "validation and test ranges by `split`; a split of N samples gets as many epochs as N\n"
      "needs, with the sequence order shuffled (numpy's `RandomState(seed)`), samples of\n"
      "`seq_len + 1` tokens that cross document boundaries and overlap by one token, and a\n"
      "shuffled sample order. N is Megatron's: train = `train_samples` (or\n"
      "`steps * global_batch`), validation = `(steps // eval_interval + 1) * eval_iters *\n"
      "global_batch`, test = `eval_iters * global_batch`. Weighted `paths` are blended\n"
      "with Megatron's rule (each dataset asked for `ceil(N * weight * 1.005)` samples; position\n"
      "i takes the dataset whose share lags its weight most). The index is cached as `.npy`\n"
      "files next to the data (or in `cache_dir`), built by each process that lacks them.\n"
      "\n"
      "Size limits (engine/checked_math.h), checked before anything is allocated: every\n"
      "dimension (`vocab_size`, `padded_vocab`, `max_seq_len`, `d_model`, `ffn_hidden`,\n"
      "`micro_batch`, `global_batch`, `eod_token`) is at most 2^31 - 1; `n_layers` and\n"
      "`virtual_stages` at most 2^16; each weight, the parameter count, the largest activation\n"
      "of a micro-batch (`micro_batch * seq_len * max(d_model, ffn_hidden, padded vocabulary)`)\n"
      "and the tokens of a step at most 2^44 elements; the training and validation samples of a\n"
      "run at most 2^40. The memory plan (`--dry-run` prints it) must fit the memory available\n"
      "(a rank's free GPU memory; on the CPU the host's MemAvailable, for each rank and for the\n"
      "ranks of one host together) unless `check_memory = false`; `[optim] lr` is at most 10.\n"
      "\n",
      train_config_schema().markdown());
}

absl::StatusOr<TrainConfig> parse_train_config(const Config& c, int world_size) {
  TrainConfig t;
  // [model]
  for (const char* key : {"vocab_size", "max_seq_len", "d_model", "n_heads", "n_layers"}) {
    ANVIL_RETURN_IF_ERROR(positive(c, "model", key));
  }
  ANVIL_RETURN_IF_ERROR(non_negative(c, "model", "padded_vocab"));
  ANVIL_RETURN_IF_ERROR(non_negative(c, "model", "ffn_hidden"));
  ANVIL_RETURN_IF_ERROR(probability(c, "model", "hidden_dropout"));
  ANVIL_RETURN_IF_ERROR(probability(c, "model", "attention_dropout"));
  ANVIL_RETURN_IF_ERROR(positive_float(c, "model", "ln_eps"));
  ANVIL_RETURN_IF_ERROR(positive_float(c, "model", "init_std"));
  // Size bounds (engine/checked_math.h) before any product of these values is formed.
  for (const char* key : {"vocab_size", "padded_vocab", "max_seq_len", "d_model", "ffn_hidden"}) {
    ANVIL_RETURN_IF_ERROR(at_most(c, "model", key, engine::kMaxDimension, kDimensionLimit));
  }
  ANVIL_RETURN_IF_ERROR(at_most(c, "model", "n_layers", kMaxLayers, "2^16 = 65536"));
  GptConfig& m = t.model;
  m.vocab_size = c.get_int("model", "vocab_size");
  m.padded_vocab = c.get_int("model", "padded_vocab");
  m.max_seq_len = c.get_int("model", "max_seq_len");
  m.d_model = c.get_int("model", "d_model");
  m.n_heads = c.get_int("model", "n_heads");
  m.n_layers = c.get_int("model", "n_layers");
  m.ffn_hidden = c.get_int("model", "ffn_hidden");
  m.hidden_dropout = static_cast<float>(c.get_float("model", "hidden_dropout"));
  m.attention_dropout = static_cast<float>(c.get_float("model", "attention_dropout"));
  m.ln_eps = static_cast<float>(c.get_float("model", "ln_eps"));
  m.init_std = static_cast<float>(c.get_float("model", "init_std"));
  parse_gpt_arch(c, m);
  ANVIL_RETURN_IF_ERROR(need(
      m.d_model % m.n_heads == 0, c, "model", "n_heads",
      absl::StrFormat("[model] d_model %d is not divisible by n_heads %d", m.d_model, m.n_heads)));
  ANVIL_RETURN_IF_ERROR(need(
      m.padded_vocab == 0 || m.padded_vocab >= m.vocab_size, c, "model", "padded_vocab",
      absl::StrFormat("%d is smaller than [model] vocab_size %d", m.padded_vocab, m.vocab_size)));
  if (absl::Status s = m.validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("[model]: ", s.message()));
  }

  // [data]
  // The loader stores a value given as the alias `path` under `paths` (ConfigSchema::add_alias).
  t.data.path = c.get_string("data", "paths");
  if (!t.data.path.empty()) {
    ANVIL_RETURN_IF_ERROR(
        parse_data_paths(c, "paths", t.data.path, &t.data.sources, &t.data.weighted));
  }
  const std::string valid_paths = c.get_string("data", "valid_paths");
  if (!valid_paths.empty()) {
    ANVIL_RETURN_IF_ERROR(parse_data_paths(c, "valid_paths", valid_paths, &t.data.valid_sources,
                                           &t.data.valid_weighted));
  }
  ANVIL_RETURN_IF_ERROR(check_split(c));
  t.data.split = c.get_string("data", "split");
  ANVIL_RETURN_IF_ERROR(parse_groups(c, &t.data));
  ANVIL_RETURN_IF_ERROR(positive(c, "data", "seq_len"));
  ANVIL_RETURN_IF_ERROR(non_negative(c, "data", "seed"));
  t.data.seq_len = c.get_int("data", "seq_len");
  t.data.seed = static_cast<uint64_t>(c.get_int("data", "seed"));
  ANVIL_RETURN_IF_ERROR(
      need(t.data.seed <= 0xffffffffULL, c, "data", "seed",
           absl::StrFormat("%d does not fit numpy's RandomState (< 2^32)", t.data.seed)));
  ANVIL_RETURN_IF_ERROR(
      need(t.data.seq_len <= m.max_seq_len, c, "data", "seq_len",
           absl::StrFormat("%d exceeds [model] max_seq_len %d (the position embedding rows)",
                           t.data.seq_len, m.max_seq_len)));
  t.data.cache_dir = c.get_string("data", "cache_dir");
  t.data.last_epoch_cutoff = c.get_float("data", "last_epoch_cutoff");
  ANVIL_RETURN_IF_ERROR(need(
      t.data.last_epoch_cutoff > 0.0 && t.data.last_epoch_cutoff <= 1.0, c, "data",
      "last_epoch_cutoff", absl::StrFormat("must be in (0, 1], got %g", t.data.last_epoch_cutoff)));
  ANVIL_RETURN_IF_ERROR(non_negative(c, "data", "eod_token"));
  ANVIL_RETURN_IF_ERROR(at_most(c, "data", "eod_token", engine::kMaxDimension, kDimensionLimit));
  t.data.eod_token = c.get_int("data", "eod_token");
  t.data.eod_mask_loss = c.get_bool("data", "eod_mask_loss");
  t.data.reset_position_ids = c.get_bool("data", "reset_position_ids");
  t.data.reset_attention_mask = c.get_bool("data", "reset_attention_mask");
  if (t.data.eod_mask_loss || t.data.reset_position_ids || t.data.reset_attention_mask) {
    ANVIL_RETURN_IF_ERROR(need(
        t.data.eod_token < m.vocab_size, c, "data", "eod_token",
        absl::StrFormat("%d is not a token id of [model] vocab_size %d (byte-level data uses 256, "
                        "GPT-2 BPE 50256)",
                        t.data.eod_token, m.vocab_size)));
  }

  // [train]
  LoopConfig& l = t.train;
  for (const char* key : {"micro_batch", "steps", "log_interval"}) {
    ANVIL_RETURN_IF_ERROR(positive(c, "train", key));
  }
  for (const char* key :
       {"global_batch", "seed", "eval_interval", "eval_iters", "max_skipped_steps"}) {
    ANVIL_RETURN_IF_ERROR(non_negative(c, "train", key));
  }
  for (const char* key : {"micro_batch", "global_batch"}) {
    ANVIL_RETURN_IF_ERROR(at_most(c, "train", key, engine::kMaxDimension, kDimensionLimit));
  }
  for (const char* key : {"steps", "eval_iters"}) {
    ANVIL_RETURN_IF_ERROR(at_most(c, "train", key, engine::kMaxSamples, "2^40 = 1099511627776"));
  }
  l.micro_batch = c.get_int("train", "micro_batch");
  l.global_batch = c.get_int("train", "global_batch");
  if (l.global_batch == 0) l.global_batch = l.micro_batch;
  ANVIL_RETURN_IF_ERROR(need(l.global_batch % l.micro_batch == 0, c, "train", "global_batch",
                             absl::StrFormat("%d is not a multiple of [train] micro_batch %d",
                                             l.global_batch, l.micro_batch)));
  l.steps = c.get_int("train", "steps");
  l.seed = static_cast<uint64_t>(c.get_int("train", "seed"));
  l.device = c.get_string("train", "device");
  l.eval_interval = c.get_int("train", "eval_interval");
  l.eval_iters = c.get_int("train", "eval_iters");
  l.log_interval = c.get_int("train", "log_interval");
  l.max_skipped_steps = c.get_int("train", "max_skipped_steps");
  l.check_memory = c.get_bool("train", "check_memory");
  ANVIL_RETURN_IF_ERROR(resolve_run_length(c, t.data.seq_len, &l));
  // The step's host token buffers and the run's sample counts (the data index holds a few
  // int64 entries per sample), each bounded.
  ANVIL_RETURN_IF_ERROR(
      need(engine::product_within({l.global_batch, t.data.seq_len}, engine::kMaxElements), c,
           "train", "global_batch",
           absl::StrFormat("%d x [data] seq_len %d tokens per step exceed the limit 2^44 = %d",
                           l.global_batch, t.data.seq_len, engine::kMaxElements)));
  ANVIL_RETURN_IF_ERROR(need(
      engine::product_within({l.steps, l.global_batch}, engine::kMaxSamples), c, "train", "steps",
      absl::StrFormat("%d x [train] global_batch %d training samples exceed the limit 2^40 = %d",
                      l.steps, l.global_batch, engine::kMaxSamples)));
  ANVIL_RETURN_IF_ERROR(
      need(engine::checked_product({l.steps, l.global_batch, t.data.seq_len}).has_value(), c,
           "train", "steps",
           absl::StrFormat("%d x [train] global_batch %d x [data] seq_len %d tokens of the run "
                           "overflow int64",
                           l.steps, l.global_batch, t.data.seq_len)));
  const int64_t evals = (l.eval_interval > 0 ? l.steps / l.eval_interval : 0) + 1;
  ANVIL_RETURN_IF_ERROR(
      need(engine::product_within({evals, l.eval_iters, l.global_batch}, engine::kMaxSamples), c,
           "train", "eval_iters",
           absl::StrFormat("%d x %d evaluations ([train] steps / eval_interval + 1) x [train] "
                           "global_batch %d validation samples exceed the limit 2^40 = %d",
                           l.eval_iters, evals, l.global_batch, engine::kMaxSamples)));
  // [optim]
  OptimConfig& o = t.optim;
  LrSchedule& lr = o.schedule;
  ANVIL_RETURN_IF_ERROR(positive_float(c, "optim", "lr"));
  lr.lr = c.get_float("optim", "lr");
  ANVIL_RETURN_IF_ERROR(need(lr.lr <= kMaxLr, c, "optim", "lr",
                             absl::StrFormat("%g exceeds the limit %g (a learning rate that "
                                             "large diverges at once)",
                                             lr.lr, kMaxLr)));
  lr.min_lr = c.get_float("optim", "min_lr");
  ANVIL_RETURN_IF_ERROR(need(lr.min_lr >= 0.0, c, "optim", "min_lr",
                             absl::StrFormat("must be >= 0, got %g", lr.min_lr)));
  ANVIL_RETURN_IF_ERROR(need(lr.min_lr <= lr.lr, c, "optim", "min_lr",
                             absl::StrFormat("%g is larger than [optim] lr %g", lr.min_lr, lr.lr)));
  ANVIL_RETURN_IF_ERROR(resolve_lr_schedule(c, l, t.data.seq_len, &lr));
  o.weight_decay = c.get_float("optim", "weight_decay");
  ANVIL_RETURN_IF_ERROR(need(o.weight_decay >= 0.0, c, "optim", "weight_decay",
                             absl::StrFormat("must be >= 0, got %g", o.weight_decay)));
  ANVIL_RETURN_IF_ERROR(probability(c, "optim", "beta1"));
  ANVIL_RETURN_IF_ERROR(probability(c, "optim", "beta2"));
  ANVIL_RETURN_IF_ERROR(positive_float(c, "optim", "eps"));
  o.beta1 = c.get_float("optim", "beta1");
  o.beta2 = c.get_float("optim", "beta2");
  o.eps = c.get_float("optim", "eps");
  o.clip_grad = c.get_float("optim", "clip_grad");
  ANVIL_RETURN_IF_ERROR(need(o.clip_grad >= 0.0, c, "optim", "clip_grad",
                             absl::StrFormat("must be >= 0 (0 = off), got %g", o.clip_grad)));

  // [log]
  t.log.all_ranks = c.get_bool("log", "all_ranks");
  t.log.tensorboard_dir = c.get_string("log", "tensorboard_dir");
  ANVIL_RETURN_IF_ERROR(positive(c, "log", "tensorboard_log_interval"));
  t.log.tensorboard_log_interval = c.get_int("log", "tensorboard_log_interval");

  // [tokenizer]
  TokenizerConfig& tok = t.tokenizer;
  tok.type = c.get_string("tokenizer", "type");
  tok.vocab_file = c.get_string("tokenizer", "vocab_file");
  tok.merge_file = c.get_string("tokenizer", "merge_file");
  ANVIL_RETURN_IF_ERROR(need(tok.type.empty() || tok.type == "Byte" || !tok.vocab_file.empty(), c,
                             "tokenizer", "vocab_file",
                             absl::StrCat("is required by [tokenizer] type ", tok.type)));
  ANVIL_RETURN_IF_ERROR(need(tok.type != "GPT2BPE" || !tok.merge_file.empty(), c, "tokenizer",
                             "merge_file", "is required by [tokenizer] type GPT2BPE"));

  // [checkpoint]
  CheckpointConfig& k = t.checkpoint;
  k.save = c.get_string("checkpoint", "save");
  k.load = c.get_string("checkpoint", "load");
  for (const char* key : {"save_interval", "keep_last", "exit_interval"}) {
    ANVIL_RETURN_IF_ERROR(non_negative(c, "checkpoint", key));
  }
  k.save_interval = c.get_int("checkpoint", "save_interval");
  k.keep_last = c.get_int("checkpoint", "keep_last");
  k.exit_interval = c.get_int("checkpoint", "exit_interval");
  k.load_step = c.get_int("checkpoint", "load_step");
  ANVIL_RETURN_IF_ERROR(need(k.load_step >= -1, c, "checkpoint", "load_step",
                             absl::StrFormat("must be >= 0 or -1 (latest), got %d", k.load_step)));
  k.finetune = c.get_bool("checkpoint", "finetune");
  k.exit_duration_min = c.get_float("checkpoint", "exit_duration_min");
  ANVIL_RETURN_IF_ERROR(
      need(k.exit_duration_min >= 0.0, c, "checkpoint", "exit_duration_min",
           absl::StrFormat("must be >= 0 (0 = off), got %g", k.exit_duration_min)));
  ANVIL_RETURN_IF_ERROR(need(k.save_interval == 0 || !k.save.empty(), c, "checkpoint",
                             "save_interval", "needs [checkpoint] save (a directory)"));
  ANVIL_RETURN_IF_ERROR(need(!k.finetune || !k.load.empty(), c, "checkpoint", "finetune",
                             "needs [checkpoint] load (a directory)"));

  // [parallel]
  ANVIL_ASSIGN_OR_RETURN(t.parallel,
                         parse_parallel_config(c, world_size, l.global_batch, l.micro_batch));
  // Every batch of a ramp-up splits into whole micro-batches on each DP rank (a multiple of pp
  // of them for the interleaved schedule).
  if (absl::StatusOr<BatchRampup> r = parse_batch_rampup(
          c.get_string("train", "rampup_batch_size"), l.global_batch,
          l.micro_batch * t.parallel.dp * (t.parallel.virtual_stages > 1 ? t.parallel.pp : 1));
      !r.ok()) {
    return c.error("train", "rampup_batch_size", std::string(r.status().message()));
  }
  // The layout against the model: Megatron pads the vocabulary to a multiple of 128 * tp.
  const ParallelConfig& pc = t.parallel;
  t.model.vocab_multiple = 128 * pc.tp;
  auto split = [&](const char* what, int64_t n) -> absl::Status {
    return need(n % pc.tp == 0, c, "parallel", "tp",
                absl::StrFormat("%d: [model] %s %d is not divisible by tp", pc.tp, what, n));
  };
  ANVIL_RETURN_IF_ERROR(split("n_heads", t.model.n_heads));
  ANVIL_RETURN_IF_ERROR(split("ffn_hidden", t.model.ffn()));
  ANVIL_RETURN_IF_ERROR(split("padded_vocab", t.model.padded()));
  ANVIL_ASSIGN_OR_RETURN(t.eval, parse_eval_config(c, t.data.seq_len, tok.type, pc));
  ANVIL_ASSIGN_OR_RETURN(t.finetune, parse_finetune_config(c, tok.type));
  const int64_t chunks = static_cast<int64_t>(pc.pp) * pc.virtual_stages;
  absl::StatusOr<std::vector<std::vector<int64_t>>> parts =
      partition_layers(t.model.n_layers, chunks, pc.pipeline_partition);
  if (!parts.ok()) {
    return c.error("parallel", "pp",
                   absl::StrFormat("pp %d * virtual_stages %d with [model] n_layers %d: %s", pc.pp,
                                   pc.virtual_stages, t.model.n_layers, parts.status().message()));
  }
  return t;
}

absl::StatusOr<TrainConfig> load_train_config(const std::string& path,
                                              const std::vector<std::string>& overrides,
                                              Config* raw, int world_size) {
  ANVIL_ASSIGN_OR_RETURN(Config c, Config::load_file(path, train_config_schema(), overrides));
  ANVIL_ASSIGN_OR_RETURN(TrainConfig t, parse_train_config(c, world_size));
  if (raw != nullptr) *raw = std::move(c);
  return t;
}

absl::StatusOr<TrainConfig> load_train_config_string(const std::string& text,
                                                     const std::string& name,
                                                     const std::vector<std::string>& overrides,
                                                     Config* raw, int world_size) {
  ANVIL_ASSIGN_OR_RETURN(Config c,
                         Config::load_string(text, name, train_config_schema(), overrides));
  ANVIL_ASSIGN_OR_RETURN(TrainConfig t, parse_train_config(c, world_size));
  if (raw != nullptr) *raw = std::move(c);
  return t;
}

absl::Status check_data_files(const std::string& prefix) {
  const std::string bin = prefix + ".bin", idx = prefix + ".idx";
  const std::string how =
      "write them with bin/preprocess (or scripts/prepare-demo-data.sh for the demo corpus); "
      "relative paths are resolved against the current directory";
  if (prefix.empty()) {
    return absl::NotFoundError(absl::StrCat(
        "[data] paths (or path) is not set: it must be the prefix PATH of PATH.bin and PATH.idx "
        "(or weighted prefixes \"0.7 a 0.3 b\"); ",
        how));
  }
  std::error_code ec;
  for (const std::string& f : {bin, idx}) {
    if (!std::filesystem::is_regular_file(f, ec)) {
      return absl::NotFoundError(
          absl::StrFormat("data file %s not found: the data prefix %s expects %s and %s; %s", f,
                          prefix, bin, idx, how));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<GptPrecision> resolve_precision(const std::string& device) {
  GptPrecision p;
  const bool have_gpu = engine::cuda_device_count() > 0;
  if (device == "cuda" && !have_gpu) {
    return absl::FailedPreconditionError(
        "[train] device = cuda but no CUDA device is visible; use device = auto or cpu");
  }
  if (device == "cuda" || (device == "auto" && have_gpu)) {
    p.device = engine::Device::kCuda;
    p.act = engine::DType::kBF16;
    p.grad = engine::DType::kF32;
  } else if (device == "cpu" || device == "auto") {
    p.device = engine::Device::kCpu;
    p.act = engine::DType::kF32;
    p.grad = engine::DType::kF32;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("[train] device: expected auto, cpu or cuda, got '%s'", device));
  }
  return p;
}

}  // namespace anvil::model
