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

// After the rest of `t` is parsed: the T5 keys (every rank reads them, T5 or not), and with
// [model] type = t5 t.t5 from the shared [model] keys plus the T5 ones, checked: [parallel]
// pp_split_rank resolved (0 = pp / 2) and the stage split valid (model/t5/t5.h t5_stage_layers),
// one model chunk per stage, no sequence parallelism, ZeRO stages 2-3 or recomputation yet
// (tp, pp, dp, ZeRO 1 and checkpoints work), no [eval] tasks yet, a [tokenizer] with
// vocab_extra_ids. pp_split_rank is refused for other model types. Errors name the file, section
// and key.
absl::Status parse_t5_config(const engine::Config& config, TrainConfig& t);

}  // namespace anvil::model
