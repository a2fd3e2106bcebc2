// Decoding of packed T0/MTF records into micro-batch rows (see mtf_batch.h).
#include "model/train/mtf_batch.h"

#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::model {

MtfRecord mtf_record(int32_t* record, int64_t seq_len) {
  const int64_t L = seq_len + 1;
  return {record, record + L, record + 2 * L};
}

int64_t decode_mtf_record(const MtfBatchOptions& o, int64_t index, int64_t seq_len,
                          const int32_t* record, int32_t* tokens, int32_t* targets,
                          int32_t* positions, int32_t* segments, int32_t* prefix_end) {
  const int64_t T = seq_len, L = T + 1;
  const int32_t* tok = record;
  const int32_t* seg = record + L;
  const int32_t* inp = record + 2 * L;
  // The record's structure, as pack_samples writes it: segments 1, 2, ... in runs, then 0s;
  // each segment's inputs first.
  int32_t prev = 1;
  for (int64_t t = 0; t < L; ++t) {
    ANVIL_CHECK_MSG(tok[t] >= 0 && tok[t] < o.vocab_size,
                    absl::StrFormat("MTF sample %d holds token id %d at %d, outside [model] "
                                    "vocab_size %d",
                                    index, tok[t], t, o.vocab_size));
    const int32_t s = seg[t];
    const bool ok_seg =
        t == 0 ? (s == 1 || s == 0) : (s == 0 || (prev != 0 && (s == prev || s == prev + 1)));
    const bool ok_inp = (inp[t] == 0 || inp[t] == 1) && (s != 0 || inp[t] == 0) &&
                        (!inp[t] || t == 0 || seg[t - 1] != s || inp[t - 1]);
    ANVIL_CHECK_MSG(ok_seg && ok_inp,
                    absl::StrFormat("MTF sample %d: segment id %d / is_inputs %d at %d is not a "
                                    "packed row's (segments 1, 2, ... then 0s, inputs first)",
                                    index, s, inp[t], t));
    prev = s;
  }
  int64_t counted = 0;
  int32_t pos = 0, start = 0, end = 0;  // the current pair's start and prefix end
  for (int64_t t = 0; t < T; ++t) {
    tokens[t] = tok[t];
    const bool loss =
        !inp[t + 1] && tok[t] != o.pad_token && !(o.eod_mask_loss && tok[t] == o.eod_token);
    targets[t] = loss ? tok[t + 1] : -1;
    counted += loss;
    positions[t] = o.reset_position_ids ? pos : static_cast<int32_t>(t);
    pos = tok[t] == o.eod_token ? 0 : pos + 1;
    if (t == 0 || seg[t] != seg[t - 1]) {
      start = static_cast<int32_t>(t);
      end = start;
      if (seg[t] != 0) {
        while (end < L && seg[end] == seg[t] && inp[end]) ++end;
      }
    }
    segments[t] = seg[t];
    prefix_end[t] = end;  // padding: its own start (causal)
  }
  return counted;
}

}  // namespace anvil::model
