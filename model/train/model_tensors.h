// The logical tensors a model has (model/checkpoint.h's names without "master/", whole shapes
// without vocabulary padding) and the check that a set of tensors is exactly those:
// bin/convert import checks an HF model's tensors against its config.json this way, so a
// config.json that disagrees with its weights (n_layer larger or smaller than the layers
// stored, a transposed weight, a missing or an extra tensor) is refused before anything is
// written, naming the tensor.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "engine/host_slice.h"
#include "model/train/train_config.h"

namespace anvil::model {

// Name -> logical shape of every parameter of cfg's model (GPT, BERT or T5; cfg validated).
std::map<std::string, std::vector<int64_t>> model_tensor_shapes(const TrainConfig& cfg);

// InvalidArgument naming `where`, the first tensor missing from `tensors`, else the first
// extra one, else the first whose shape differs from the model's (both shapes); each also names
// the model's layer count, which is what a config.json most often gets wrong.
absl::Status check_model_tensors(const TrainConfig& cfg,
                                 const std::vector<engine::HostSlice>& tensors,
                                 const std::string& where);

}  // namespace anvil::model
