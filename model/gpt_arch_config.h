// The [model] keys that choose the GPT architecture variant (docs/models.md): position
// embedding (learned, ALiBi, rotary, none), embedding LayerNorm, MLP activation (GELU or a gated
// unit), norm (LayerNorm, RMSNorm), linear biases, tied LM head. train_config.cc adds them to the
// schema and parses them into GptConfig through these two functions.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/gpt.h"

namespace anvil::model {

// Adds the architecture keys of [model] (GPT-2 defaults) to `schema`.
void add_gpt_arch_schema(engine::ConfigSchema& schema);

// Reads them from `config` into `m` (the schema already restricted the choices).
void parse_gpt_arch(const engine::Config& config, GptConfig& m);

// OK for GPT-2's architecture (every key at its default); else Unimplemented naming the first
// key that differs and `what` cannot do with it (e.g. the GPT-2-only Hugging Face export).
absl::Status require_gpt2_architecture(const engine::Config& config, const std::string& what);

}  // namespace anvil::model
