// The [model] keys that choose the GPT architecture variant (docs/models.md): position
// embedding (learned, ALiBi, rotary, none), embedding LayerNorm, MLP activation (GELU or a gated
// unit), norm (LayerNorm, RMSNorm), linear biases, tied LM head. train_config_schema.cc adds
// them to the schema and train_config.cc parses them into GptConfig, through these two
// functions.
#pragma once

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/stack/gpt.h"

namespace anvil::model {

// Adds the architecture keys of [model] (GPT-2 defaults) to `schema`.
void add_gpt_arch_schema(engine::ConfigSchema& schema);

// Reads them from `config` into `m` (the schema already restricted the choices).
void parse_gpt_arch(const engine::Config& config, GptConfig& m);

}  // namespace anvil::model
