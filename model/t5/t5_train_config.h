// The T5 part of bin/train's configuration ([model] type = t5): the schema keys T5 adds and
// their parsing into TrainConfig::t5 (model/t5/t5.h), [data] decoder_seq_len and [tokenizer]
// vocab_extra_ids. train_config_schema.cc and train_config.cc call these two functions.
#pragma once

#include "absl/status/status.h"
#include "engine/config.h"

namespace anvil::model {

struct TrainConfig;

// Adds [model] t5_version, decoder_layers, d_kv, relative_buckets, relative_max_distance,
// [data] decoder_seq_len and [tokenizer] vocab_extra_ids.
void add_t5_schema(engine::ConfigSchema& schema);

// The keys of the sequence-to-sequence samples every family parses ([tokenizer] vocab_extra_ids,
// [data] decoder_seq_len) into t.
absl::Status parse_seq2seq_keys(const engine::Config& config, TrainConfig& t);

// The T5 family's part of parse_train_config (model/t5/t5_family.cc): t.t5 from [model], the
// pipeline split (pp_split_rank) and what type t5 does not support yet.
absl::Status parse_t5_model(const engine::Config& config, TrainConfig& t);

}  // namespace anvil::model
