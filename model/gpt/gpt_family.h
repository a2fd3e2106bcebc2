// The GPT family of the model-family registry (model/train/family.h; registered by
// model/families/builtin_families.cc).
#pragma once

#include "model/train/family.h"

namespace anvil::model {

// [model] type = gpt: decoder-only LMs (GPT-2, BLOOM, LLaMA variants) on Megatron's GPT samples.
Family gpt_family();

}  // namespace anvil::model
