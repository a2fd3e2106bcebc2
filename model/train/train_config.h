// bin/train's configuration: the ini schema (sections [model] [data] [train] [optim] [log]
// [parallel] [checkpoint], every key typed, defaulted and documented; docs/config.md is generated
// from it) and its parsing into plain structs, with every semantic check up front. A bad
// combination is an error naming the file:line (or override) and the key with the numbers, e.g.
//   "configs/x.ini:14: [train] global_batch: 48 is not a multiple of [train] micro_batch 32 *
//   [parallel] dp 1 = 32".
// This is model/ code and must not read data formats: the data path is checked for existence
// only (check_data_files); opening and sampling it is io/'s job, wired up by bin/train.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"
#include "model/stack/gpt.h"
#include "model/train/batch_schedule.h"
#include "model/train/curriculum.h"
#include "model/train/data_groups.h"
#include "model/train/eval_config.h"
#include "model/train/finetune_config.h"
#include "model/train/lr_schedule.h"
#include "model/train/precision_config.h"
#include "parallel/parallel_config.h"

namespace anvil::model {

// One dataset of a blend: PREFIX.bin / PREFIX.idx with its (unnormalized) weight.
struct DataSource {
  double weight = 1.0;
  std::string prefix;
};

struct DataConfig {
  std::string path;                       // the [data] paths value as written (or [data] path's)
  std::vector<DataSource> sources;        // parsed: "PREFIX" or "W1 PREFIX1 W2 PREFIX2 ..."
  bool weighted = false;                  // sources came with weights: every split is a blend
  std::vector<DataSource> valid_sources;  // [data] valid_paths: a separate validation set
  bool valid_weighted = false;
  std::string split = "969,30,1";     // train,valid,test weights over each source's sequences
  int64_t seq_len = 1024;             // T: tokens per sample (inputs), <= model.max_seq_len
  uint64_t seed = 1234;               // Megatron's data seed: np.random.RandomState(seed)
  std::string cache_dir;              // index caches; "" = next to the data
  int64_t eod_token = 50256;          // end-of-document id (GPT-2's <|endoftext|>; 256 byte-level)
  bool eod_mask_loss = false;         // no loss on the token after an eod (Megatron's rule)
  bool reset_position_ids = false;    // positions restart after every eod
  bool reset_attention_mask = false;  // document-aware causal mask (attention within a doc)
  bool wrap_held_out = true;          // valid_exhausted = wrap (else error)
  // Prefix-LM (pretrain_prefix_lm.py, model/train/prefix_lm.h): a random bidirectional prefix
  // per sample (per document with reset_attention_mask); no loss on the prefix when
  // loss_on_targets_only.
  bool prefix_lm = false;
  bool loss_on_targets_only = false;
  // reweight_loss_based_on_position_frequency: token t of T weighs (T - t) / (T + 1) * 2 in the
  // loss (model/train/prefix_lm.h position_frequency_weight).
  bool reweight_loss = false;
  // What each prefix-LM micro-batch's weighted loss sum is divided by: kPipe = the fork's
  // GPTModelPipe (DeepSpeed, the BigScience runs): micro_batch x the expected loss tokens per
  // sample (T; with loss_on_targets_only (T + 1) / 2, and (T + 2) / 3 when also reweighted);
  // kMaskSum = its GPTModel without DeepSpeed: the sum of the micro-batch's loss mask (weights
  // included).
  enum class PrefixLmNormalizer { kPipe, kMaskSum };
  PrefixLmNormalizer prefix_lm_normalizer = PrefixLmNormalizer::kPipe;
  // Packed T0/MTF finetuning (finetune_t0_non_causal_decoder.py, model/train/mtf_batch.h): the
  // paths are PREFIX of PREFIX_inputs_document / PREFIX_targets_document; pad_token is the
  // tokenizer's pad id (-1: not set).
  bool mtf = false;
  int64_t pad_token = -1;
  double last_epoch_cutoff = 0.95;  // separate last epoch below this share of an epoch
  double mask_prob = 0.15;          // BERT: masked-LM share of the tokens
  double short_seq_prob = 0.1;      // BERT: probability of a shorter target length
  int64_t decoder_seq_len = 128;    // T5: decoder tokens per sample (seq_len: the encoder's)
  // Named groups (--{train,valid,test}-weighted-split-paths); empty = paths and split.
  std::vector<DataGroup> train_groups, valid_groups, test_groups;
};

struct LoopConfig {
  int64_t micro_batch = 8;                // B: samples per forward/backward
  int64_t global_batch = 8;               // samples per optimizer step (a multiple of B)
  int64_t steps = 1000;                   // optimizer steps (resolved from train_samples/tokens)
  int64_t train_samples = 0;              // > 0: the run's sample budget (sizes the train split)
  int64_t train_tokens = 0;               // > 0: the run's token budget
  BatchRampup rampup;                     // global batch ramp-up (disabled by default)
  StepRanges skip_ranges;                 // steps whose data is consumed but not trained on
  uint64_t seed = 1234;                   // parameter init and dropout
  std::string device = "auto";            // auto | cpu | cuda
  std::string attention_kernel = "auto";  // auto | mma_sync (Precision::attention)
  std::string attention_dropout_mask = "save";  // save | regenerate (Precision::save_dropout_mask)
  // two_pass | one_pass (Precision::fused_activation_dropout)
  std::string activation_dropout_kernel = "two_pass";
  PrecisionConfig precision;       // precision and loss scaling (model/train/precision_config.h)
  int64_t eval_interval = 1000;    // evaluate every N steps (0: only at the end)
  int64_t eval_iters = 100;        // validation global batches per evaluation (0: no evaluation)
  int64_t log_interval = 100;      // log a line every N steps
  int64_t max_skipped_steps = 10;  // stop after N consecutive skipped steps (0: never)
  bool check_memory = true;        // refuse a memory plan larger than the available memory
  std::string kill_switch_path;    // its existence saves and stops the run (kill_switch.h)

  // Gradient accumulation steps on one rank (of `dp` data-parallel ranks), at the full batch.
  int64_t accumulation_steps(int64_t dp = 1) const { return global_batch / (micro_batch * dp); }
  // The training samples Megatron sizes the train split for: train_samples, else
  // steps * global_batch.
  int64_t run_samples() const { return train_samples > 0 ? train_samples : steps * global_batch; }
};

struct OptimConfig {
  LrSchedule schedule;  // lr, min_lr, warmup_steps, decay_steps (resolved), decay_style
  double weight_decay = 0.01;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double clip_grad = 1.0;  // max global L2 norm of the gradient; 0 = no clipping
};

// [tokenizer]: the tokenizer the data was made with (bin/preprocess's types and files). When
// set, bin/train takes [model] vocab_size and [data] eod_token from it unless given (then they
// must agree), and checkpoints keep a copy of its files (docs/checkpoints.md).
struct TokenizerConfig {
  std::string type;         // "" (none) | GPT2BPE | BertWordPiece{LowerCase,Case} | SentencePiece
                            // | HF | Byte
  std::string vocab_file;   // encoder.json / vocab.json, vocab.txt, .model, tokenizer.json
  std::string merge_file;   // merges.txt / vocab.bpe (GPT2BPE)
  int vocab_extra_ids = 0;  // T5 sentinels <extra_id_0> ... appended to the vocabulary
};

// [checkpoint] (docs/checkpoints.md): saving, resuming and run limits. bin/train acts on it.
struct CheckpointConfig {
  std::string save;           // directory to save into ("" = no saving)
  int64_t save_interval = 0;  // save every N steps (0: only at the end and on exits)
  int64_t keep_last = 0;      // after a save keep the newest K complete ones (0 = all)
  std::string load;           // directory to resume from ("" = start from scratch)
  int64_t load_step = -1;     // step to load (-1: the one `latest` names)
  bool finetune = false;      // load the weights only: fresh optimizer, step 0
  // On resume, when the checkpoint's lr schedule differs from the config's (Megatron's
  // AnnealingLR load_state_dict): the config's wins (override), the checkpoint's wins
  // (use_checkpoint), or, with neither, the resume is refused.
  bool override_lr_scheduler = false;
  bool use_checkpoint_lr_scheduler = false;
  int64_t exit_interval = 0;       // save and exit after a step that is a multiple of N
  double exit_duration_min = 0.0;  // save and exit once this many wall minutes have passed
};

struct LogConfig {
  bool all_ranks = false;
  std::string tensorboard_dir;           // TensorBoard event files ("" = none)
  int64_t tensorboard_log_interval = 1;  // per-step scalars every N steps
};

// What a model family keeps in a TrainConfig beyond the shared sections (T5: its T5Config):
// defined and read by the family's own code (through a typed accessor of its folder), copied with
// the TrainConfig.
struct FamilyConfig {
  virtual ~FamilyConfig() = default;
  virtual std::unique_ptr<FamilyConfig> clone() const = 0;
};

// A FamilyConfig with value semantics: a copy clones it.
class FamilyConfigHolder {
 public:
  FamilyConfigHolder() = default;
  FamilyConfigHolder(const FamilyConfigHolder& o) : part_(o.part_ ? o.part_->clone() : nullptr) {}
  FamilyConfigHolder& operator=(const FamilyConfigHolder& o) {
    if (this != &o) part_ = o.part_ ? o.part_->clone() : nullptr;
    return *this;
  }
  FamilyConfigHolder(FamilyConfigHolder&&) = default;
  FamilyConfigHolder& operator=(FamilyConfigHolder&&) = default;

  FamilyConfig* get() { return part_.get(); }
  const FamilyConfig* get() const { return part_.get(); }
  void reset(std::unique_ptr<FamilyConfig> part) { part_ = std::move(part); }

 private:
  std::unique_ptr<FamilyConfig> part_;
};

struct TrainConfig {
  // The model family: [model] type, the key of the registry (model/train/family.h).
  std::string family = "gpt";
  GptConfig model;
  DataConfig data;
  LoopConfig train;
  OptimConfig optim;
  LogConfig log;
  parallel::ParallelConfig parallel;
  CheckpointConfig checkpoint;
  TokenizerConfig tokenizer;
  EvalConfig eval;  // [eval]: zero-shot tasks at every evaluation (model/train/eval_config.h)
  FinetuneConfig finetune;  // [finetune]: bin/finetune's classification (finetune_config.h)
  // The family's own part (T5: its T5Config, model/t5/t5_train_config.h), set by its parse hook.
  FamilyConfigHolder family_config;
  CurriculumConfig curriculum;  // [curriculum]: sequence-length curriculum (curriculum.h)
};

// The schema of bin/train's ini file (a process-wide singleton: Config keeps a pointer to it).
const engine::ConfigSchema& train_config_schema();

// docs/config.md: a short introduction followed by train_config_schema().markdown().
// `bin/train --print-config-docs > docs/config.md` regenerates the file; a test keeps them equal.
std::string config_docs_markdown();

// Typed values of a loaded Config (loaded against train_config_schema()), validated:
// InvalidArgument from Config::error naming the key, its origin and the numbers.
// `world_size`: the ranks launched ([parallel] is checked against it).
absl::StatusOr<TrainConfig> parse_train_config(const engine::Config& config, int world_size = 1);

// Config::load_file + parse_train_config. `raw` (optional) receives the loaded Config, e.g. for
// Config::dump().
absl::StatusOr<TrainConfig> load_train_config(const std::string& path,
                                              const std::vector<std::string>& overrides,
                                              engine::Config* raw = nullptr, int world_size = 1);
absl::StatusOr<TrainConfig> load_train_config_string(const std::string& text,
                                                     const std::string& name,
                                                     const std::vector<std::string>& overrides,
                                                     engine::Config* raw = nullptr,
                                                     int world_size = 1);

// NotFound, one line, when PREFIX.bin or PREFIX.idx is missing (or the prefix is empty: [data]
// paths not set), naming the path and both expected files and how to make them.
absl::Status check_data_files(const std::string& prefix);

// Device and dtypes for `device` ("auto" | "cpu" | "cuda") and `precision` ([train] precision,
// precision_act_dtype): parameters/activations of that dtype (auto: bf16 on CUDA, f32 on the
// CPU) with f32 gradients, master weights and optimizer state. "auto" picks CUDA when
// engine::cuda_device_count() > 0. FailedPrecondition for "cuda" without a GPU.
absl::StatusOr<Precision> resolve_precision(const std::string& device,
                                            const std::string& precision = "auto");

}  // namespace anvil::model
