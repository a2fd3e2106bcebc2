// The T5 family of the model-family registry (model/train/family.h; registered by
// model/families/builtin_families.cc).
#pragma once

#include "model/train/family.h"

namespace anvil::model {

// [model] type = t5: the encoder-decoder on Megatron's span-corruption samples.
Family t5_family();

}  // namespace anvil::model
