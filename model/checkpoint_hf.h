// Hugging Face layouts of anvil's models for bin/convert, one table per model family
// (model/gpt/hf_gpt2.cc, model/gpt/hf_bloom.cc, model/gpt/hf_llama.cc, model/bert/hf_bert.cc,
// model/t5/hf_t5.cc): the [model] settings (a "type" setting names the model type; without one the
// family is a gpt) that make a model that family, how config.json fields map to [model] keys
// (model/hf_config.h), and how each anvil tensor is stored in HF: renamed, transposed, split into
// several HF tensors (LLaMA's q/k/v and gate/up projections), or with its heads interleaved
// (BLOOM's fused qkv). The anvil side is the logical tensors of model/train/checkpoint.h without
// "master/": HF GPT-2 names, weights [out, in], the embedding without vocabulary padding. Parameter
// names live with the model (model/gpt_layout); the tables here only refer to them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"
#include "engine/host_slice.h"

namespace anvil::model {

// A config.json field that is a [model] key: hf_key's value is anvil_key's (type: the ini
// key's). zero_is_null: anvil's 0 ("default") is JSON null in HF (GPT-2's n_inner);
// zero_is_4d: anvil's 0 means 4 * d_model, which HF needs written out (intermediate_size);
// zero_is_per_head likewise d_model / n_heads.
// Several fields may name one anvil key: export writes each, import requires them to agree.
struct HfConfigField {
  std::string hf_key, anvil_key;
  engine::ConfigType type;
  bool zero_is_null = false;
  bool zero_is_4d = false;
  bool zero_is_per_head = false;  // anvil's 0 means d_model / n_heads (T5's d_kv)
  bool zero_is_heads = false;     // anvil's 0 means n_heads (num_key_value_heads)
};

// A config.json field with a fixed value (JSON text), written on export and checked on import
// when present: anvil implements exactly this variant.
struct HfFixedField {
  std::string hf_key, json_value;
};

// A [model] key = value (ini text) of the family.
struct HfSetting {
  std::string key, value;
};

// How an anvil tensor's values sit in its HF tensor(s).
enum class HfLayout {
  kSame,        // same values and shape (nn.Linear weights are [out, in] on both sides)
  kTransposed,  // HF keeps the 2-D weight [in, out] (GPT-2's Conv1D)
  // anvil's rows are [3][heads][rows / (3 heads)] (q of all heads | k | v), HF's are
  // [heads][3][rows / (3 heads)] (BLOOM's query_key_value, per head q, k, v).
  kHeadsInterleaved,
  // The q | k | v projections (HF q_proj [heads * hd, ...], k_proj and v_proj [kv_heads * hd,
  // ...]) and anvil's c_attn: with kv_heads == heads their rows stacked; with fewer (grouped-
  // query attention) in Megatron-core's grouped order, per kv head g: [q heads g*G .. g*G+G-1 |
  // k_g | v_g] (G = heads / kv_heads; model/blocks/attention.h). Weights and biases alike.
  kGroupedQkv,
};

// One anvil tensor and the HF tensor(s) holding it; "{i}" in both stands for the layer index.
// With several HF names the anvil tensor's rows are theirs concatenated in order (LLaMA:
// c_attn = [q_proj; k_proj; v_proj], c_fc = [gate_proj; up_proj]). A rule whose tensors are
// absent is skipped (biases of a bias-free model, wpe without learned positions); HF names are
// without the family prefix.
struct HfTensorRule {
  std::string anvil;
  std::vector<std::string> hf;
  HfLayout layout = HfLayout::kSame;
};

struct HfFamily {
  std::string model_type;    // config.json "model_type"
  std::string architecture;  // config.json "architectures": [..]
  // Prepended to every HF name on export (what save_pretrained writes), optional on import;
  // names in `unprefixed` (outside the base model: lm_head.weight) never have it.
  std::string prefix;
  std::vector<std::string> unprefixed;
  std::vector<HfTensorRule> tensors;
  // HF tensors import skips: buffers (causal masks, rotary inv_freq) ...
  std::vector<std::string> ignored_names, ignored_suffixes;
  // ... and the LM head of a tied model (equal to the embedding).
  std::vector<std::string> tied_head_names;
  // HF tensors that repeat another one, {copy, original} (T5's encoder/decoder embed_tokens are
  // `shared`): skipped on import when equal to the original, an error when not (anvil keeps one
  // tensor for both).
  std::vector<std::pair<std::string, std::string>> copies;
  std::vector<HfConfigField> config;
  std::vector<HfFixedField> fixed;
  // [model] settings of the family: written on import, required on export (they pick the
  // family of a checkpoint; a family without a "type" setting is for [model] type gpt).
  std::vector<HfSetting> settings;
  // [model] values written on import when no config.json field gives them (BLOOM has no
  // maximum sequence length: ALiBi).
  std::vector<HfSetting> import_defaults;
  // config.json's rope_scaling object <-> [model] rope_scaling* (linear, llama3; null: none).
  bool rope_scaling = false;
  // Overrides bin/convert import adds when it validates the imported [model] as a train config
  // outside the model's keys (T5 training needs a tokenizer with sentinels; none is recorded).
  std::vector<std::string> import_overrides;
  // Export writes config.json bos_token_id = eos_token_id = [data] eod_token (the causal LMs'
  // document separator); false: HF's own ids stay (BERT's pad 0; T5's pad 0 / eos 1).
  bool eod_is_eos = true;
};

const HfFamily& gpt2_hf_family();
const HfFamily& bloom_hf_family();
const HfFamily& llama_hf_family();
const HfFamily& mistral_hf_family();  // model/gpt/hf_llama.cc
const HfFamily& qwen2_hf_family();
const HfFamily& bert_hf_family();
const HfFamily& t5_v10_hf_family();  // model/t5/hf_t5.cc
const HfFamily& t5_v11_hf_family();
// Every family, GPT-2 first.
const std::vector<const HfFamily*>& hf_families();
// The family of a config.json "model_type"; among several of one type (T5 v1.0, v1.1) the
// first whose fixed fields agree with those in `fields` (config.json's, as JSON text:
// feed_forward_proj), else the first. NotFound naming the supported ones.
absl::StatusOr<const HfFamily*> hf_family(const std::string& model_type,
                                          const std::map<std::string, std::string>& fields = {});

// What the layouts need to know of the model.
struct HfDims {
  int64_t n_heads = 1;
  int64_t n_kv_heads = 0;  // 0: n_heads
  int64_t kv() const { return n_kv_heads == 0 ? n_heads : n_kv_heads; }
};

// anvil logical tensors (names without "master/") -> HF tensors (full names, prefix included).
// An anvil tensor no rule names is an error (the checkpoint is not this family's model).
absl::StatusOr<std::vector<engine::HostSlice>> to_hf_tensors(const HfFamily& f,
                                                             std::vector<engine::HostSlice> anvil,
                                                             const HfDims& dims);
// HF tensors (names as stored, prefix optional) -> anvil logical tensors. tied: the model's LM
// head is the embedding (tied_head_names are skipped). Errors name the tensor: a part of a split
// tensor missing, shapes that do not concatenate or split into heads, a tensor no rule uses.
absl::StatusOr<std::vector<engine::HostSlice>> from_hf_tensors(const HfFamily& f,
                                                               std::vector<engine::HostSlice> hf,
                                                               const HfDims& dims, bool tied);

// A whole 2-D tensor transposed ([a, b] -> [b, a]); others unchanged.
engine::HostSlice transpose_2d(const engine::HostSlice& t);

}  // namespace anvil::model
