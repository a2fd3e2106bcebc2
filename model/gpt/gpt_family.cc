// The GPT entry of the model-family registry (model/train/family.h): the shared stack's Family
// (model/stack_train/stack_family.h) on Megatron's GPT samples (tokens[T + 1], or packed T0/MTF
// rows), a causal LM that refuses the stack's encoder features.
#include "model/gpt/gpt_family.h"

#include "absl/status/status.h"
#include "engine/config.h"
#include "model/stack_train/stack_family.h"
#include "model/train/mtf_batch.h"

namespace anvil::model {

namespace {

// GPT's rules on the shared stack's features: a causal LM head without the encoder features.
absl::Status gpt_features(const engine::Config& c, GptConfig& m) {
  if (!m.causal || m.mlm_head() || m.binary_head || m.type_vocab_size != 0) {
    return c.error("model", "type",
                   "bidirectional attention, token types and the MLM and binary heads are "
                   "BERT's (type bert)");
  }
  if (m.embed_layernorm && m.learned_positions()) {
    // Megatron-DeepSpeed normalizes the word embedding before adding the positions; BLOOM, the
    // model that uses the embedding LayerNorm, has no position table.
    return c.error("model", "embed_layernorm",
                   "needs position_embedding alibi or none (the LayerNorm of the word embedding "
                   "before learned positions is not supported)");
  }
  return absl::OkStatus();
}

}  // namespace

Family gpt_family() {
  Family f = stack_family("gpt", "GPT");
  f.doc = "causal LM (pretrain_gpt.py).";
  f.model_features = gpt_features;
  f.samples = SampleLayout::kTokens;
  f.causal_lm = true;
  f.record_width = [](const TrainConfig& cfg) {
    return cfg.data.mtf ? mtf_record_width(cfg.data.seq_len) : cfg.data.seq_len + 1;
  };
  f.parse = [](const engine::Config& c, TrainConfig& t) -> absl::Status {
    if (t.curriculum.enabled && !t.model.causal) {
      return c.error("curriculum", "enabled", kNoCurriculum);
    }
    return parse_stack_layers(c, t);
  };
  return f;
}

}  // namespace anvil::model
