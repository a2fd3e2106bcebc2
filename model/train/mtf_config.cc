// [data] mtf / pad_token parsing and checks (see mtf_config.h).
#include "model/train/mtf_config.h"

#include "absl/strings/str_format.h"

namespace anvil::model {

absl::Status parse_mtf_keys(const engine::Config& c, const GptConfig& m, bool causal_lm,
                            DataConfig* d) {
  d->mtf = c.get_bool("data", "mtf");
  d->pad_token = c.get_int("data", "pad_token");
  if (!d->mtf) return absl::OkStatus();
  if (!causal_lm) {
    return c.error("data", "mtf",
                   "needs [model] type = gpt with causal attention (the packed inputs widen the "
                   "causal mask)");
  }
  if (m.position_embedding != PositionEmbedding::kAlibi &&
      m.position_embedding != PositionEmbedding::kRotary) {
    return c.error("data", "mtf",
                   "needs [model] position_embedding = alibi or rotary, as the fork's "
                   "finetune_t0_non_causal_decoder.py (position ids run over the whole packed "
                   "row; absolute positions would need them restarted per pair)");
  }
  if (d->pad_token < 0 || d->pad_token >= m.vocab_size) {
    return c.error("data", "pad_token",
                   absl::StrFormat("[data] mtf needs the tokenizer's pad id (the fork's "
                                   "tokenizer.pad; BLOOM: 3), a token id below [model] "
                                   "vocab_size %d; got %d",
                                   m.vocab_size, d->pad_token));
  }
  for (const char* key : {"prefix_lm", "loss_on_targets_only", "reset_attention_mask"}) {
    if (c.get_bool("data", key)) {
      return c.error("data", key,
                     "is not combined with [data] mtf (its packed rows bring their own prefix "
                     "per pair, the loss is on the targets only, and the pairs are kept apart)");
    }
  }
  if (d->sources.size() != 1 || d->weighted || !d->valid_sources.empty() ||
      !d->train_groups.empty() || !d->valid_groups.empty() || !d->test_groups.empty()) {
    return c.error(
        "data", "mtf",
        "reads one unweighted [data] paths = PREFIX (the files PREFIX_inputs_document and "
        "PREFIX_targets_document) split by [data] split; blends, valid_paths and weighted split "
        "paths are not implemented for it yet");
  }
  return absl::OkStatus();
}

}  // namespace anvil::model
