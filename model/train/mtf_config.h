// [data] mtf and pad_token (GptConfig through train_config.h): packed T0/MTF finetuning
// (model/train/mtf_batch.h) parsed and checked against the rest of the config, with errors naming
// the key: the fork's finetune_t0_non_causal_decoder.py runs a GPT (causal) with ALiBi or rotary
// positions (it raises for absolute ones), over one --data-path prefix (its weighted --data-path is
// a TODO); the loss is on the targets (loss_on_targets_only and prefix_lm are other recipes) and
// eod resets of the attention mask do not combine with the packed mask here.
#pragma once

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/train/train_config.h"

namespace anvil::model {

// Reads [data] mtf and pad_token into d (the other [data] keys already parsed into it);
// causal_lm: the family is a causal LM (model/train/family.h) with causal attention.
absl::Status parse_mtf_keys(const engine::Config& c, const GptConfig& m, bool causal_lm,
                            DataConfig* d);

}  // namespace anvil::model
