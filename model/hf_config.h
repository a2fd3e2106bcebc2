// config.json <-> [model] for bin/convert, by the family tables of model/checkpoint_hf.h.
// config.json is seen as the JSON text of each top-level field ("4", "1e-05", "true",
// "\"silu\"", "null"), so model/ needs no JSON library; bin/convert parses and writes the file.
// On import the members of an object field are also given as "field.member" (rope_scaling's;
// transformers 5's rope_parameters, read as the rope_theta and rope_scaling it replaces).
// [model] keys the schema does not declare (a build without the GPT-variant options) read as
// GPT-2's values; a family that needs another value there is refused with the key named.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "engine/config.h"
#include "model/checkpoint_hf.h"

namespace anvil::model {

using HfJsonFields = std::map<std::string, std::string>;

// The family whose settings the checkpoint's [model] has (export). None: InvalidArgument naming,
// per family, the first setting that differs.
absl::StatusOr<const HfFamily*> hf_family_of(const engine::Config& cfg,
                                             const engine::ConfigSchema& schema);

// config.json's fields for [model] (export): the family's mapped and fixed fields. The caller
// adds model_type, architectures and what is not the model's (dtype, token ids).
HfJsonFields hf_config_fields(const HfFamily& f, const engine::Config& cfg,
                              const engine::ConfigSchema& schema);

// What import makes of a config.json: the [model] section to train the weights with, and what
// the tensor conversion needs.
struct HfImportedModel {
  std::string ini;  // "[model]\nkey = value\n..."
  HfDims dims;
  bool tied = true;  // the LM head is the embedding
};

// Fixed fields must hold the family's value when present; fields naming one [model] key must
// agree; numbers must be numbers; num_key_value_heads must divide num_attention_heads.
// Errors start with `where` (the config.json path) and name the field.
absl::StatusOr<HfImportedModel> hf_import_model(const HfFamily& f, const HfJsonFields& json,
                                                const engine::ConfigSchema& schema,
                                                const std::string& where);

}  // namespace anvil::model
