// The BERT family of the model-family registry (model/train/family.h; registered by
// model/families/builtin_families.cc).
#pragma once

#include "model/train/family.h"

namespace anvil::model {

// [model] type = bert: BertForPreTraining on Megatron's BERT sentence pairs.
Family bert_family();

}  // namespace anvil::model
