// Hugging Face layouts of anvil's models for bin/convert, one table per model family: how
// parameter names map, which weights HF stores transposed, which HF tensors anvil does not keep,
// and how config.json fields map to the [model] section. GPT-2 today; BERT, T5 and BLOOM add a
// table each (their parameter names live with their models, as GPT-2's do in gpt_layout).
// The checkpoint side is the logical tensors of model/checkpoint.h ("master/<name>"); names are
// HF GPT-2's already, weights anvil-[out, in], the embedding without vocabulary padding.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/config.h"
#include "engine/host_slice.h"

namespace anvil::model {

// A config.json field that is a [model] key: hf_key's value is anvil_key's (type: the ini
// key's). zero_is_null: anvil's 0 ("default") is JSON null in HF (n_inner).
struct HfConfigField {
  std::string hf_key, anvil_key;
  engine::ConfigType type;
  bool zero_is_null = false;
};

// A config.json field with a fixed value (JSON text), written on export and checked on import
// when present: anvil implements exactly this variant.
struct HfFixedField {
  std::string hf_key, json_value;
};

struct HfFamily {
  std::string model_type;    // config.json "model_type"
  std::string architecture;  // config.json "architectures": [..]
  // Prepended to every name on export (what save_pretrained writes), optional on import.
  std::string prefix;
  std::vector<std::string> transposed_suffixes;  // weights HF keeps [in, out] (GPT-2's Conv1D)
  // HF tensors import skips: the tied LM head (equal to the embedding), causal-mask buffers.
  std::vector<std::string> ignored_names, ignored_suffixes;
  std::vector<HfConfigField> config;
  std::vector<HfFixedField> fixed;
};

const HfFamily& gpt2_hf_family();
// The family of a config.json "model_type"; NotFound naming the supported ones.
absl::StatusOr<const HfFamily*> hf_family(const std::string& model_type);

// anvil parameter name -> HF tensor name.
std::string to_hf_name(const HfFamily& f, const std::string& name);
// HF tensor name -> anvil parameter name; nullopt for a tensor anvil does not keep.
std::optional<std::string> from_hf_name(const HfFamily& f, const std::string& hf_name);
bool hf_transposed(const HfFamily& f, const std::string& name);

// A whole 2-D tensor transposed ([a, b] -> [b, a]); others unchanged.
engine::HostSlice transpose_2d(const engine::HostSlice& t);

}  // namespace anvil::model
