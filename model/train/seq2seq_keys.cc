// The sequence-to-sequence keys of bin/train's ini (see seq2seq_keys.h).
#include "model/train/seq2seq_keys.h"

#include <cstdint>

#include "absl/strings/str_format.h"
#include "engine/checked_math.h"

namespace anvil::model {

void add_seq2seq_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("data", "decoder_seq_len", ConfigType::kInt, "128",
        "type t5: decoder tokens per sample (--decoder-seq-length); [data] seq_len is the "
        "encoder's (--encoder-seq-length).");
  s.add("tokenizer", "vocab_extra_ids", ConfigType::kInt, "0",
        "Sentinel tokens <extra_id_0> ... appended to the vocabulary (--vocab-extra-ids; T5: 100, "
        "as bin/preprocess --vocab-extra-ids made the data).");
}

absl::Status parse_seq2seq_keys(const engine::Config& c, TrainConfig& t) {
  const int64_t extra = c.get_int("tokenizer", "vocab_extra_ids");
  if (extra < 0 || extra > 1000000) {
    return c.error("tokenizer", "vocab_extra_ids",
                   absl::StrFormat("must be in [0, 1000000], got %d", extra));
  }
  t.tokenizer.vocab_extra_ids = static_cast<int>(extra);
  t.data.decoder_seq_len = c.get_int("data", "decoder_seq_len");
  if (t.data.decoder_seq_len < 2 || t.data.decoder_seq_len > engine::kMaxDimension) {
    return c.error("data", "decoder_seq_len",
                   absl::StrFormat("must be in [2, 2^31 - 1], got %d", t.data.decoder_seq_len));
  }
  return absl::OkStatus();
}

}  // namespace anvil::model
