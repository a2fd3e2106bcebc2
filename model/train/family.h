// The model-family registry (issue 22 item 1): what differs between GPT, BERT, T5 (and any other
// family) behind one struct keyed by [model] type, so that the trainer, the checkpoint code and
// the binaries look a family up once and call through it instead of branching on the type:
//   - config: the family's part of parse_train_config after the shared sections (T5: its T5Config,
//     pp_split_rank; GPT/BERT: the layer partition) and the "model: ..." summary line;
//   - the memory plan, the optimizer-offload host bytes and the Model (model/model.h) of a rank;
//   - the sample-record layout the binaries' data wiring produces (model/train/sample_record.h);
//   - checkpoints: the model record (model/train/arch_record.h), the logical tensors
//     (model/train/model_tensors.h) and layout keys of its own.
// Families fill a Family in their own folder (model/gpt/gpt_family.cc, model/bert/bert_family.cc,
// model/t5/t5_family.cc); register_builtin_families (model/families/builtin_families.cc, the one
// file that names every family folder) adds them to the process's registry on its first use. The
// registry itself never includes a family folder: families depend on it, not back.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/config.h"
#include "model/model.h"
#include "model/train/train_config.h"
#include "model/train/train_model.h"

namespace anvil::model {

// The int32 record of one sample a family trains on (model/train/sample_record.h), i.e. which
// io/ dataset the binaries wire to the trainer:
//   kTokens  : tokens[T + 1] (Megatron's GPT samples; GPT, LLaMA, BLOOM, prefix-LM)
//   kBertPair: a BERT sentence pair with its masks (io/bert_dataset.h)
//   kT5Spans : a T5 span-corruption pair (io/t5_dataset.h, model/t5/t5_train_model.h)
enum class SampleLayout { kTokens, kBertPair, kT5Spans };

struct Family {
  std::string type;   // the [model] type value that selects it ("gpt")
  std::string title;  // in messages ("GPT")
  // What the type means, for bin/train's schema (docs/config.md): "causal LM (pretrain_gpt.py)."
  std::string doc;
  SampleLayout samples = SampleLayout::kTokens;
  // int32 entries of one sample record of cfg.
  std::function<int64_t(const TrainConfig& cfg)> record_width;

  // The family's part of parse_train_config, after the shared sections filled `t`: its own keys
  // and combinations; errors name the key (Config::error).
  std::function<absl::Status(const engine::Config& c, TrainConfig& t)> parse;
  // Optional: the [model] keys of the family's own (T5: t5_version, d_kv, ...), added to
  // bin/train's schema (train_config_schema) when it is built. Empty: none.
  std::function<void(engine::ConfigSchema& schema)> schema;
  // Optional: the features of the shared stack (GptConfig) the family switches on from its
  // [model] keys, right after the architecture keys are read and before GptConfig::validate
  // (BERT: bidirectional attention, token types, the MLM and binary heads) and the family's
  // rules on the architecture (which features and variants it admits). Empty: none.
  std::function<absl::Status(const engine::Config& c, GptConfig& m)> model_features;
  // The "model: ..." line bin/train logs (size, layers, parameters, FLOPs).
  std::function<std::string(const TrainConfig& cfg)> summary;
  // Activation slots (micro-batches in flight) of the rank at `at` (the memory plan's line).
  std::function<absl::StatusOr<int64_t>(const TrainConfig&, const ModelPlace&)> activation_slots;

  // The memory plan of the rank at `at` (communicators unused), the host bytes of its optimizer
  // offload (0 without [parallel] offload_optimizer) and its Model (model/train/train_model.h).
  std::function<absl::StatusOr<engine::MemoryPlan>(const TrainConfig&, const Precision&,
                                                   const ModelPlace&)>
      plan;
  std::function<absl::StatusOr<size_t>(const TrainConfig&, const Precision&, const ModelPlace&)>
      offload_bytes;
  std::function<absl::StatusOr<std::unique_ptr<Model>>(const TrainConfig&, const Precision&,
                                                       const ModelPlace&)>
      create;
  // Whether a tied parameter is summed over the embedding group (GPT's first and last stage).
  bool uses_embedding_group = false;
  // Classification finetuning (bin/finetune): inputs [CLS] a [SEP] b [SEP] padded with [PAD] and
  // the head reads the pooled [CLS] (BERT); false: eod-separated sequences, the last token.
  bool pooled_cls = false;
  // A causal LM that bin/generate, bin/serve and bin/eval run (model/infer/gpt_inference.h).
  bool causal_lm = false;
  // An encoder-decoder: bin/train's [eval] tasks put the context on the encoder and score the
  // continuation with the decoder (model/tasks/seq2seq_eval.h) instead of the causal LM's
  // windows (model/tasks/eval_tasks.h).
  bool encoder_decoder = false;

  // Checkpoints: the keys of the model record that decide what a stored tensor means
  // (arch_record.h; "type" is added by the caller), every logical tensor with its whole shape
  // (model_tensors.h), the layers in words ("4 layers") for messages, and layout keys beyond
  // tp/pp/dp/zero_stage/virtual_stages/sequence_parallel (T5: pp_split_rank).
  std::function<void(const TrainConfig&, std::map<std::string, std::string>&)> model_record;
  std::function<std::map<std::string, std::vector<int64_t>>(const TrainConfig&)> tensor_shapes;
  std::function<std::string(const TrainConfig&)> layers;
  std::function<void(const TrainConfig&, std::map<std::string, int64_t>&)> layout_record;
};

// Families by [model] type.
class FamilyRegistry {
 public:
  // AlreadyExists when a family of f.type is registered; InvalidArgument for an empty type or a
  // missing hook.
  absl::Status add(Family f);
  // NotFound naming `type` and the known types.
  absl::StatusOr<const Family*> find(const std::string& type) const;
  // The registered types, sorted.
  std::vector<std::string> types() const;

 private:
  std::vector<std::unique_ptr<const Family>> families_;  // stable addresses
};

// Adds the families built into anvil (model/families/builtin_families.cc).
absl::Status register_builtin_families(FamilyRegistry& registry);

// The process's registry: the built-in families on first use; a program (a test) may add more
// before it parses a config of their type.
FamilyRegistry& family_registry();

// family_registry().find(type).
absl::StatusOr<const Family*> find_family(const std::string& type);

// OK when the family is a causal LM (inference: generation, serving, zero-shot evaluation),
// else InvalidArgument naming its type.
absl::Status check_causal_lm(const Family& family);

// The family of a parsed config (TrainConfig::family, validated by parse_train_config): a fatal
// CHECK when it is not registered.
const Family& family_of(const TrainConfig& cfg);

}  // namespace anvil::model
