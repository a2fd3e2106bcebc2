// bin/train's configuration before the model family's part (see train_config.h): every section
// parsed and checked except the family's keys and the layer partition, which
// parse_train_config (load_train_config.cc) adds on top. Private to model/train/.
#pragma once

#include "absl/status/statusor.h"
#include "engine/config.h"

namespace anvil::model {

struct TrainConfig;  // (train_config.h)

absl::StatusOr<TrainConfig> parse_train_sections(const engine::Config& c, int world_size);

}  // namespace anvil::model
