// The model a checkpoint was saved from (io::CheckpointInfo::model), one record for every
// family, and the check that a run loads a checkpoint into the same model. Values are text,
// keys are the [model] keys that decide what a stored tensor means (for GPT and BERT and their
// BLOOM/LLaMA variants: type, vocab_size, d_model, n_heads, n_layers, ffn_hidden (resolved),
// ln_eps, position_embedding (rotary_base, rotary_percent with rotary), embed_layernorm,
// activation, norm, norm_placement, bias, tie_embeddings, type_vocab_size and bert_binary_head
// for bert; for t5: t5_version, vocab_size, d_model, d_kv, n_heads, ffn_hidden, n_layers,
// decoder_layers, relative_buckets, relative_max_distance, ln_eps; both: vocab_padding_in_loss and
// padded_vocab when the loss spans the padded rows), the keys a finetune may change
// (max_seq_len, hidden_dropout, attention_dropout) and the tokenizer (tokenizer.type,
// tokenizer.vocab_extra_ids and tokenizer.files, a hash of its files' contents; absent without a
// [tokenizer]). Two models with the same tensor shapes can still compute different functions
// (1 layer of 16 heads vs 2 of 4 with d_model fixed, or the activation): the shape check of the
// tensor load cannot see that, the record can.
#pragma once

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "model/train/train_config.h"

namespace anvil::model {

// The record of cfg's model (cfg.model, t5_config(cfg) for type t5, cfg.tokenizer).
std::map<std::string, std::string> checkpoint_model_record(const TrainConfig& cfg);

// The shortest decimal that reads back as v ("1e-05", not "9.99999975e-06"): the record's
// floats.
std::string record_text(float v);

// With [model] vocab_padding_in_loss the padded embedding rows are parameters: the record gets
// vocab_padding_in_loss = true and padded_vocab (the padded size), so a resume must use the same
// setting and padding (refused by name otherwise); without it nothing (records stay as they were).
void add_vocab_padding_record(bool in_loss, int64_t padded_vocab,
                              std::map<std::string, std::string>& r);

// For a reader of a checkpoint (eval, generation, finetune, export): the padded vocabulary size
// its record pins (the rows the embedding was saved with), or 0 when the loss spanned the real
// vocabulary only. InvalidArgument naming `where` when TP degree `tp` does not divide it.
absl::StatusOr<int64_t> saved_loss_padding(const std::map<std::string, std::string>& saved, int tp,
                                           const std::string& where);
// The same into a reader's model config: with a record of vocab_padding_in_loss, sets it and
// padded_vocab in `m` (the checkpoint holds those rows); otherwise leaves `m` as it is.
absl::Status adopt_vocab_padding(const std::map<std::string, std::string>& saved, int tp,
                                 const std::string& where, GptConfig& m);

// True for the keys [checkpoint] finetune = true lets a run change.
bool finetune_may_change(const std::string& key);

// InvalidArgument naming `where` (the checkpoint) and every key whose value differs between
// the saved record and cfg's, with both values (a different "type" alone when the family
// differs); keys the saved record lacks are not checked (older checkpoints). With
// cfg.checkpoint.finetune, finetune_may_change keys may differ.
absl::Status check_checkpoint_model(const std::map<std::string, std::string>& saved,
                                    const TrainConfig& cfg, const std::string& where);

}  // namespace anvil::model
