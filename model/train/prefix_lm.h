// Prefix-LM inputs of one GPT sample, as Megatron-DeepSpeed's pretrain_prefix_lm.py builds them
// (megatron/utils.py get_prefix_indices with partial_prefix_indices = None, then
// get_ltor_masks_and_position_ids with prefix_indices and loss_on_targets_only):
//   per row (no reset_attention_mask): prefix p = randint(1, T); tokens [0, p) see each other
//     (the square [0, p) x [0, p) of the mask is 1), the rest is causal;
//   per document (reset_attention_mask): documents end at each eod (a last document without one
//     ends at T); document d from s_d with eod at e_d (T for the last partial one) draws
//     p_d = randint(s_d + 1, e_d), and [s_d, p_d) x [s_d, p_d) is 1.
//   loss_on_targets_only: no loss on the inputs [s, p - 1) (the last prefix token predicts the
//     first target).
// The mask becomes the attention op's per-query prefix end (ops/flash_attention.h):
//   prefix_end[t] = p of t's row or document, so visible(i, j) = (j <= i || j < p) within the
//   document: the same mask, no dense [T, T].
// Random draws: CPython's random.randint (engine/python_random.h), from random.Random(seed * 2^64 +
// sample index) for each sample, not from the fork's one process-wide stream (seeded --seed +
// 100 * pp rank, shared with evaluation, different per pipeline stage, saved in checkpoints),
// so a sample's prefix does not depend on the layout, the evaluation schedule or a resume.
// A document made of its eod token alone (s_d == e_d: two eods in a row, or an eod first),
// where the fork's randint raises, draws nothing and gets p_d = e_d (no prefix).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace anvil::model {

struct PrefixLmOptions {
  int32_t eod_token = 0;
  bool per_document = false;          // [data] reset_attention_mask
  bool loss_on_targets_only = false;  // [data] loss_on_targets_only
  uint64_t seed = 0;                  // [data] seed
};

// The prefix index p of each row (one) or document of the sample of index `sample_index`,
// tokens: [T].
std::vector<int32_t> prefix_indices(const PrefixLmOptions& o, int64_t sample_index,
                                    const int32_t* tokens, int64_t T);

// prefix_end: [T] (=) each token's p; targets: [T] (-1 written on the inputs when
// loss_on_targets_only, others left as they are). tokens: [T].
void apply_prefix_lm(const PrefixLmOptions& o, int64_t sample_index, const int32_t* tokens,
                     int64_t T, int32_t* prefix_end, int32_t* targets);

// reweight_loss_based_on_position_frequency's weight of position t of T, in f32 as torch
// computes it: arange(T, 0, -1) / (T + 1) * 2.
float position_frequency_weight(int64_t t, int64_t T);

}  // namespace anvil::model
