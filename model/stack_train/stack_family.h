// The model-family registry hooks (model/train/family.h) that GPT and BERT share: both train the
// stack's GptModel through GptTrainModel. Their family folders (model/gpt/gpt_family.cc,
// model/bert/bert_family.cc) start from stack_family and add their own samples, rules, stack
// features and record keys.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/train/family.h"

namespace anvil::model {

// The Family of the shared stack under [model] type `type` (`title` in the summary line): the
// summary, activation slots, memory plan, optimizer-offload bytes, create, the embedding group,
// the architecture keys of the checkpoint record, the logical tensors and the layers in words.
// The caller sets samples, record_width, parse and model_features.
Family stack_family(std::string type, std::string title);

// The stack's part of a family's parse: no T5 pipeline split, and the layer partition over the
// pipeline chunks (pp * virtual_stages).
absl::Status parse_stack_layers(const engine::Config& c, const TrainConfig& t);

// "true" / "false", as the checkpoint record writes a bool.
std::string record_bool(bool v);

// The refusal of [curriculum] for samples it cannot truncate.
inline constexpr char kNoCurriculum[] =
    "sequence-length curriculum truncates causal (GPT-family) samples; [model] type bert and t5 "
    "do not support it";

}  // namespace anvil::model
