// Packed T0/MTF samples (Megatron-DeepSpeed's finetune_t0_non_causal_decoder.py, BLOOMZ's path)
// as the GPT trainer's record and micro-batch rows.
// Record (fixed-width int32, like model/train/sample_record.h's), L = T + 1 (the fork packs
// --seq-length + 1 tokens):
//   tokens[L] | segment_ids[L] | is_inputs[L]
// as DecoderPackedMTFDataset.pack_samples writes them (io/mtf_packing.h: pairs inputs then
// targets, segment ids 1, 2, ... per pair, 0 on the trailing padding, is_inputs 1 on inputs).
// Decoding is the fork's get_batch_pipe:
//   tokens = row[0, T), labels = row[1, T + 1), segment_ids, is_inputs = [0, T);
//   loss at t iff !is_inputs[t + 1] && tokens[t] != pad (&& tokens[t] != eod with
//     eod_mask_loss): targets only (the last input predicts the first target), not the padding
//     (the last target of a row's last pair does predict the first pad, as in the fork);
//   position ids arange(T) across the whole row (not restarted per pair; the fork refuses
//     learned absolute positions for this reason: alibi or rotary only), restarted after each
//     eod with reset_position_ids;
//   attention (get_packed_attention_mask, is_causal False): visible(i, j) iff seg[i] == seg[j]
//     != 0 and (j <= i || is_inputs[i] && is_inputs[j]). As the inputs are a prefix of their
//     pair, that is the attention op's document segments = the segment ids and the per-query
//     prefix_end = the pair's start + its input length (ops/flash_attention.h). Padding (segment
//     0) attends causally among itself here (the fork: to nothing); no real query sees it and
//     it has no loss, so the losses and gradients are the same.
#pragma once

#include <cstdint>

namespace anvil::model {

// int32 entries of one MTF record at sequence length T.
inline int64_t mtf_record_width(int64_t seq_len) { return 3 * (seq_len + 1); }

struct MtfRecord {
  int32_t* tokens;       // [T + 1]
  int32_t* segment_ids;  // [T + 1]
  int32_t* is_inputs;    // [T + 1] 0/1
};
MtfRecord mtf_record(int32_t* record, int64_t seq_len);

struct MtfBatchOptions {
  int64_t vocab_size = 0;  // token ids must be below it
  int32_t pad_token = 0;   // [data] pad_token (the fork's tokenizer.pad)
  int32_t eod_token = 0;
  bool eod_mask_loss = false;
  bool reset_position_ids = false;
};

// One micro-batch row from `record` (of sample `index`, for messages): tokens, targets (-1: no
// loss), positions, segments, prefix_end: [T] each (=). Returns the counted targets. A record
// that pack_samples cannot have written (ids outside the vocabulary, segments not 1, 2, ... in
// runs then 0s, inputs not a prefix of their pair) is a fatal CHECK naming `index`.
int64_t decode_mtf_record(const MtfBatchOptions& o, int64_t index, int64_t seq_len,
                          const int32_t* record, int32_t* tokens, int32_t* targets,
                          int32_t* positions, int32_t* segments, int32_t* prefix_end);

}  // namespace anvil::model
