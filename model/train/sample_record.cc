// Sample record layouts (see sample_record.h).
#include "model/train/sample_record.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::model {

BertRecord bert_record(int32_t* record, int64_t seq_len) {
  const int64_t T = seq_len;
  return {record, record + T, record + 2 * T, record + 3 * T, record + 4 * T, record + 5 * T};
}

int64_t decode_bert_record(const GptConfig& cfg, int64_t index, int64_t seq_len, int32_t* record,
                           int32_t* tokens, int32_t* token_types, int32_t* targets,
                           int32_t* lengths, int32_t* binary_labels, int64_t b) {
  const BertRecord r = bert_record(record, seq_len);
  int64_t counted = 0, length = 0;
  for (int64_t t = 0; t < seq_len; ++t) {
    const bool real = r.padding_mask[t] != 0;
    // Megatron pads at the end: the real tokens are a prefix, so one length per sample is the
    // whole key-padding mask (ops/flash_attention.h kv_lengths).
    ANVIL_CHECK_MSG(!real || t == length,
                    absl::StrFormat("BERT sample %d: padding_mask is not 1s followed by 0s "
                                    "(position %d)",
                                    index, t));
    length += real;
    const bool masked = r.loss_mask[t] != 0;
    const int32_t target = masked ? r.labels[t] : -1;
    ANVIL_CHECK_MSG(r.tokens[t] >= 0 && r.tokens[t] < cfg.vocab_size && target < cfg.vocab_size &&
                        (!masked || target >= 0),
                    absl::StrFormat("BERT sample %d holds token id %d / label %d at position %d, "
                                    "outside [model] vocab_size %d",
                                    index, r.tokens[t], target, t, cfg.vocab_size));
    ANVIL_CHECK_MSG(r.types[t] >= 0 && r.types[t] < cfg.type_vocab_size,
                    absl::StrFormat("BERT sample %d holds token type %d at position %d, outside "
                                    "[model] type_vocab_size %d",
                                    index, r.types[t], t, cfg.type_vocab_size));
    tokens[t] = r.tokens[t];
    token_types[t] = r.types[t];
    targets[t] = target;
    counted += masked;
  }
  lengths[b] = static_cast<int32_t>(length);
  binary_labels[b] = cfg.binary_head ? r.is_random[0] : -1;
  return counted;
}

}  // namespace anvil::model
