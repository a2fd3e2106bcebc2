// The T5 part of bin/train's configuration ([model] type = t5): the [model] keys T5 adds to the
// schema (its Family::schema hook), their parsing into the T5 part of a TrainConfig (its
// Family::parse hook, model/t5/t5_family.cc) and the typed access to that part.
#pragma once

#include <memory>

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/t5/t5.h"
#include "model/train/train_config.h"

namespace anvil::model {

// TrainConfig::family_config of [model] type t5: the model, from [model].
struct T5FamilyConfig final : FamilyConfig {
  T5Config t5;
  std::unique_ptr<FamilyConfig> clone() const override;
};

// The T5 model of t (created default-valued when t carries none yet).
T5Config& t5_config(TrainConfig& t);
// The T5 model of t; a default T5Config when t carries none (a config of another type).
const T5Config& t5_config(const TrainConfig& t);

// Adds [model] t5_version, decoder_layers, d_kv, relative_buckets, relative_max_distance.
void add_t5_schema(engine::ConfigSchema& schema);

// The T5 family's part of parse_train_config (model/t5/t5_family.cc): t5_config(t) from [model],
// the pipeline split (pp_split_rank) and what type t5 does not support yet.
absl::Status parse_t5_model(const engine::Config& config, TrainConfig& t);

}  // namespace anvil::model
