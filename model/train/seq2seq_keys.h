// The keys of sequence-to-sequence samples that every family parses (a family that has no
// decoder ignores them): [data] decoder_seq_len and [tokenizer] vocab_extra_ids.
#pragma once

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/train/train_config.h"

namespace anvil::model {

// Adds [data] decoder_seq_len and [tokenizer] vocab_extra_ids to the schema.
void add_seq2seq_schema(engine::ConfigSchema& schema);

// Those keys of `config` into t.data.decoder_seq_len and t.tokenizer.vocab_extra_ids.
absl::Status parse_seq2seq_keys(const engine::Config& config, TrainConfig& t);

}  // namespace anvil::model
