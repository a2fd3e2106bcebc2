// Sample records: what a SampleFn (model/train/trainer.h) writes for one sample, a fixed-width
// int32 record per model type (GptConfig::type), so that bin/train wires any io/ dataset to the
// trainer without model/ reading data formats:
//   GPT : tokens[T + 1]            inputs tokens[0, T), targets tokens[1, T + 1)
//   BERT: tokens[T] | types[T] | labels[T] | loss_mask[T] | padding_mask[T] | is_random[1]
//         Megatron's BERT sample (io/bert_dataset.h): labels are the original tokens where
//         loss_mask is 1 (else ignored), padding_mask is 1 on the real tokens (a prefix of the
//         sample) and 0 on the padding, is_random the binary head's label.
// decode_bert_record turns a BERT record into one row of the host micro-batch arrays of
// GptBatch (model/stack/gpt.h).
#pragma once

#include <cstdint>

#include "model/stack/gpt.h"

namespace anvil::model {

// int32 entries of one BERT record at sequence length seq_len (the family's record_width,
// model/bert/bert_family.cc; the GPT record is tokens[T + 1]).
inline int64_t bert_record_width(int64_t seq_len) { return 5 * seq_len + 1; }

// The fields of a BERT record, views into it.
struct BertRecord {
  int32_t* tokens;        // [T]
  int32_t* types;         // [T]
  int32_t* labels;        // [T]
  int32_t* loss_mask;     // [T]
  int32_t* padding_mask;  // [T]
  int32_t* is_random;     // [1]
};
BertRecord bert_record(int32_t* record, int64_t seq_len);

// Row b of a BERT micro-batch from `record`: tokens, token_types [T] (=); targets [T] (=) the
// label where loss_mask is 1, else -1; lengths[b] (=) the real tokens; binary_labels[b] (=)
// is_random with the binary head, else -1. Returns the counted targets. A record whose ids are
// outside the vocabulary / type vocabulary or whose padding is not a suffix is a fatal CHECK
// naming `index` (a data/config mismatch that would index past a table).
int64_t decode_bert_record(const GptConfig& cfg, int64_t index, int64_t seq_len, int32_t* record,
                           int32_t* tokens, int32_t* token_types, int32_t* targets,
                           int32_t* lengths, int32_t* binary_labels, int64_t b);

}  // namespace anvil::model
