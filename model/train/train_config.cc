// Parsing and validation of a loaded bin/train config into TrainConfig (see train_config.h);
// the schema itself and docs/config.md: model/train/train_config_schema.cc.
#include "model/train/train_config.h"

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
#include "model/stack/gpt_arch_config.h"
#include "model/train/family.h"
#include "model/train/mtf_config.h"
#include "model/train/train_sections.h"

namespace anvil::model {
namespace {

using engine::Config;

constexpr char kDimensionLimit[] =
    "2^31 - 1 = 2147483647 (token ids, positions and dimensions are int32)";
constexpr double kMaxLr = 10.0;  // [optim] lr: larger is a typo or a unit mistake

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

absl::StatusOr<TrainConfig> parse_train_sections(const Config& c, int world_size) {
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
  m.vocab_padding_in_loss = c.get_bool("model", "vocab_padding_in_loss");
  m.max_seq_len = c.get_int("model", "max_seq_len");
  m.d_model = c.get_int("model", "d_model");
  m.n_heads = c.get_int("model", "n_heads");
  m.n_kv_heads = c.get_int("model", "n_kv_heads");
  m.n_layers = c.get_int("model", "n_layers");
  m.ffn_hidden = c.get_int("model", "ffn_hidden");
  m.hidden_dropout = static_cast<float>(c.get_float("model", "hidden_dropout"));
  m.attention_dropout = static_cast<float>(c.get_float("model", "attention_dropout"));
  m.ln_eps = static_cast<float>(c.get_float("model", "ln_eps"));
  m.init_std = static_cast<float>(c.get_float("model", "init_std"));
  parse_gpt_arch(c, m);
  t.family = c.get_string("model", "type");
  if (const Family& family = family_of(t); family.model_features) {
    ANVIL_RETURN_IF_ERROR(family.model_features(c, m));
  }
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
  ANVIL_RETURN_IF_ERROR(
      need(m.sliding_window == 0 || t.data.seq_len <= m.sliding_window, c, "data", "seq_len",
           absl::StrFormat("%d exceeds [model] sliding_window %d: sliding-window attention is not "
                           "implemented (anvil attends to every earlier position, which equals the "
                           "window only for sequences of at most sliding_window tokens)",
                           t.data.seq_len, m.sliding_window)));
  t.data.cache_dir = c.get_string("data", "cache_dir");
  t.data.last_epoch_cutoff = c.get_float("data", "last_epoch_cutoff");
  t.data.mask_prob = c.get_float("data", "mask_prob");
  t.data.short_seq_prob = c.get_float("data", "short_seq_prob");
  ANVIL_RETURN_IF_ERROR(need(t.data.mask_prob >= 0.0 && t.data.mask_prob < 1.0, c, "data",
                             "mask_prob",
                             absl::StrFormat("must be in [0, 1), got %g", t.data.mask_prob)));
  ANVIL_RETURN_IF_ERROR(need(t.data.short_seq_prob >= 0.0 && t.data.short_seq_prob <= 1.0, c,
                             "data", "short_seq_prob",
                             absl::StrFormat("must be in [0, 1], got %g", t.data.short_seq_prob)));
  ANVIL_RETURN_IF_ERROR(need(
      t.data.last_epoch_cutoff > 0.0 && t.data.last_epoch_cutoff <= 1.0, c, "data",
      "last_epoch_cutoff", absl::StrFormat("must be in (0, 1], got %g", t.data.last_epoch_cutoff)));
  ANVIL_RETURN_IF_ERROR(non_negative(c, "data", "eod_token"));
  ANVIL_RETURN_IF_ERROR(at_most(c, "data", "eod_token", engine::kMaxDimension, kDimensionLimit));
  t.data.eod_token = c.get_int("data", "eod_token");
  t.data.eod_mask_loss = c.get_bool("data", "eod_mask_loss");
  t.data.reset_position_ids = c.get_bool("data", "reset_position_ids");
  t.data.reset_attention_mask = c.get_bool("data", "reset_attention_mask");
  t.data.wrap_held_out = c.get_string("data", "valid_exhausted") == "wrap";
  t.data.prefix_lm = c.get_bool("data", "prefix_lm");
  t.data.loss_on_targets_only = c.get_bool("data", "loss_on_targets_only");
  ANVIL_RETURN_IF_ERROR(need(t.data.prefix_lm || !t.data.loss_on_targets_only, c, "data",
                             "loss_on_targets_only", "needs [data] prefix_lm = true"));
  // Prefix-LM and packed MTF widen a causal LM's mask: a causal-LM family with causal attention.
  const bool causal_lm = family_of(t).causal_lm && m.causal;
  ANVIL_RETURN_IF_ERROR(
      need(!t.data.prefix_lm || causal_lm, c, "data", "prefix_lm",
           "needs [model] type = gpt with causal attention (the prefix widens the causal mask)"));
  t.data.reweight_loss = c.get_bool("data", "reweight_loss_based_on_position_frequency");
  ANVIL_RETURN_IF_ERROR(need(t.data.prefix_lm || !t.data.reweight_loss, c, "data",
                             "reweight_loss_based_on_position_frequency",
                             "needs [data] prefix_lm = true (pretrain_prefix_lm.py's option)"));
  const bool mask_sum = c.get_string("data", "prefix_lm_normalizer") == "mask_sum";
  ANVIL_RETURN_IF_ERROR(need(t.data.prefix_lm || !mask_sum, c, "data", "prefix_lm_normalizer",
                             "needs [data] prefix_lm = true"));
  t.data.prefix_lm_normalizer =
      mask_sum ? DataConfig::PrefixLmNormalizer::kMaskSum : DataConfig::PrefixLmNormalizer::kPipe;
  ANVIL_RETURN_IF_ERROR(parse_mtf_keys(c, m, causal_lm, &t.data));
  // Eod handling is for token streams (SampleLayout::kTokens); BERT's sentence pairs and T5's
  // span pairs bring their own masks and have no eod.
  const Family& family = family_of(t);
  if (family.samples != SampleLayout::kTokens) {
    for (const char* key : {"eod_mask_loss", "reset_position_ids", "reset_attention_mask"}) {
      ANVIL_RETURN_IF_ERROR(need(!c.get_bool("data", key), c, "data", key,
                                 absl::StrCat("handles the eods of token streams (type gpt); type ",
                                              family.type, " samples have no eod")));
    }
  }
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
  l.steps = c.get_int("train", "steps");
  l.seed = static_cast<uint64_t>(c.get_int("train", "seed"));
  l.device = c.get_string("train", "device");
  l.attention_kernel = c.get_string("train", "attention_kernel");
  l.attention_dropout_mask = c.get_string("train", "attention_dropout_mask");
  l.activation_dropout_kernel = c.get_string("train", "activation_dropout_kernel");
  ANVIL_ASSIGN_OR_RETURN(l.precision, parse_precision_config(c));
  l.eval_interval = c.get_int("train", "eval_interval");
  l.eval_iters = c.get_int("train", "eval_iters");
  l.log_interval = c.get_int("train", "log_interval");
  l.max_skipped_steps = c.get_int("train", "max_skipped_steps");
  l.check_memory = c.get_bool("train", "check_memory");
  l.kill_switch_path = c.get_string("train", "kill_switch_path");
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
  k.override_lr_scheduler = c.get_bool("checkpoint", "override_lr_scheduler");
  k.use_checkpoint_lr_scheduler = c.get_bool("checkpoint", "use_checkpoint_lr_scheduler");
  ANVIL_RETURN_IF_ERROR(need(!(k.override_lr_scheduler && k.use_checkpoint_lr_scheduler), c,
                             "checkpoint", "use_checkpoint_lr_scheduler",
                             "and override_lr_scheduler exclude each other (Megatron asserts "
                             "the same): pick the config's schedule or the checkpoint's"));
  k.exit_duration_min = c.get_float("checkpoint", "exit_duration_min");
  ANVIL_RETURN_IF_ERROR(
      need(k.exit_duration_min >= 0.0, c, "checkpoint", "exit_duration_min",
           absl::StrFormat("must be >= 0 (0 = off), got %g", k.exit_duration_min)));
  ANVIL_RETURN_IF_ERROR(need(k.save_interval == 0 || !k.save.empty(), c, "checkpoint",
                             "save_interval", "needs [checkpoint] save (a directory)"));
  ANVIL_RETURN_IF_ERROR(need(!k.finetune || !k.load.empty(), c, "checkpoint", "finetune",
                             "needs [checkpoint] load (a directory)"));

  // [parallel] (global_batch against micro_batch * dp too)
  ANVIL_ASSIGN_OR_RETURN(
      t.parallel, parallel::parse_parallel_config(c, world_size, l.global_batch, l.micro_batch));
  // Every batch of a ramp-up splits into whole micro-batches on each DP rank (a multiple of pp
  // of them for the interleaved schedule).
  if (absl::StatusOr<BatchRampup> r = parse_batch_rampup(
          c.get_string("train", "rampup_batch_size"), l.global_batch,
          l.micro_batch * t.parallel.dp * (t.parallel.virtual_stages > 1 ? t.parallel.pp : 1));
      !r.ok()) {
    return c.error("train", "rampup_batch_size", std::string(r.status().message()));
  }
  // The layout against the model: Megatron pads the vocabulary to a multiple of 128 * tp.
  const parallel::ParallelConfig& pc = t.parallel;
  t.model.vocab_multiple = 128 * pc.tp;
  auto split = [&](const char* what, int64_t n) -> absl::Status {
    absl::Status s = parallel::check_tp_split(absl::StrCat("[model] ", what), n, pc.tp);
    return s.ok() ? s : c.error("parallel", "tp", std::string(s.message()));
  };
  ANVIL_RETURN_IF_ERROR(split("n_heads", t.model.n_heads));
  ANVIL_RETURN_IF_ERROR(split("ffn_hidden", t.model.ffn()));
  ANVIL_RETURN_IF_ERROR(split("padded_vocab", t.model.padded()));
  ANVIL_ASSIGN_OR_RETURN(t.eval, parse_eval_config(c, t.data.seq_len, tok.type));
  ANVIL_ASSIGN_OR_RETURN(t.finetune, parse_finetune_config(c, tok.type));
  ANVIL_ASSIGN_OR_RETURN(t.curriculum, parse_curriculum_config(c, t.data.seq_len));
  if (t.curriculum.enabled && t.data.mtf) {
    return c.error("curriculum", "enabled",
                   "is not combined with [data] mtf (a truncated packed row would cut its pairs, "
                   "whose inputs see each other bidirectionally)");
  }
  if (t.curriculum.enabled && t.data.prefix_lm) {
    return c.error("curriculum", "enabled",
                   "is not combined with [data] prefix_lm (the fork truncates the tokens away; "
                   "here a prefix past the cut would still see them)");
  }
  // The family's own rules: its parse (model/train/family.h, after these sections).
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

absl::StatusOr<Precision> resolve_precision(const std::string& device,
                                            const std::string& precision) {
  Precision p;
  const bool have_gpu = engine::cuda_device_count() > 0;
  if (device == "cuda" && !have_gpu) {
    return absl::FailedPreconditionError(
        engine::cuda_kernels_built()
            ? "[train] device = cuda but no CUDA device is visible; use device = auto or cpu"
            : "[train] device = cuda but this build has no CUDA kernels (cmake "
              "-DANVIL_CUDA_KERNELS=OFF); use device = auto or cpu, or a full build");
  }
  if (device == "cuda" || (device == "auto" && have_gpu)) {
    p.device = engine::Device::kCuda;
  } else if (device == "cpu" || device == "auto") {
    p.device = engine::Device::kCpu;
  } else {
    return absl::InvalidArgumentError(
        absl::StrFormat("[train] device: expected auto, cpu or cuda, got '%s'", device));
  }
  ANVIL_ASSIGN_OR_RETURN(p.act, precision_act_dtype(precision, p.device));
  p.grad = engine::DType::kF32;
  return p;
}

}  // namespace anvil::model
