// The BERT entry of the model-family registry (model/train/family.h): the shared stack's Family
// (model/stack_train/stack_family.h) with BERT's features switched on (bidirectional attention,
// token types, the MLM head and the optional binary head), its sentence-pair samples
// (model/train/sample_record.h), its [eval] and [curriculum] refusals and the token-type /
// binary-head keys of its checkpoint record. Its Hugging Face names are in hf_bert.cc.
#include "model/bert/bert_family.h"

#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/checked_math.h"
#include "engine/config.h"
#include "model/stack_train/stack_family.h"
#include "model/train/sample_record.h"

namespace anvil::model {

namespace {

// BERT's features on the shared stack: bidirectional attention, token types, the MLM head and
// (bert_binary_head) the binary head; LayerNorm and a non-gated MLP.
absl::Status bert_features(const engine::Config& c, GptConfig& m) {
  m.causal = false;
  m.head = Head::kMlm;
  m.type_vocab_size = c.get_int("model", "type_vocab_size");
  m.binary_head = c.get_bool("model", "bert_binary_head");
  if (m.type_vocab_size < 1 || m.type_vocab_size > engine::kMaxDimension) {
    return c.error("model", "type_vocab_size",
                   absl::StrCat("type bert needs it in [1, 2^31 - 1], got ", m.type_vocab_size));
  }
  if (!m.layernorm() || m.glu()) {
    return c.error("model", "type",
                   "type bert needs norm layernorm and a non-gated activation (gelu or gelu_erf)");
  }
  return absl::OkStatus();
}

}  // namespace

Family bert_family() {
  Family f = stack_family("bert", "BERT");
  f.doc =
      "masked LM (pretrain_bert.py): bidirectional attention with the samples' key-padding mask, "
      "token-type embeddings, the MLM head (dense, GELU-erf, LayerNorm, tied decoder + output "
      "bias) and, with bert_binary_head, the pooler and the sentence-order head; the loss is "
      "Megatron's masked-LM mean over the masked tokens plus the binary cross-entropy, per "
      "micro-batch. BERT reads sentence-split data (bin/preprocess --split-sentences) with a "
      "WordPiece [tokenizer]. HF BertForPreTraining numerics: norm_placement post, activation "
      "gelu_erf, embed_layernorm true, ln_eps 1e-12 (configs/bert_base.ini); Megatron's BERT: "
      "pre, gelu (its fused bias-GELU is the tanh approximation), no embedding LayerNorm.";
  f.model_features = bert_features;
  f.samples = SampleLayout::kBertPair;
  f.pooled_cls = true;
  f.record_width = [](const TrainConfig& cfg) { return bert_record_width(cfg.data.seq_len); };
  f.parse = [](const engine::Config& c, TrainConfig& t) -> absl::Status {
    if (t.eval.any()) {
      return c.error("model", "type",
                     "bert: the [eval] zero-shot tasks score a causal LM; remove them for BERT");
    }
    if (t.curriculum.enabled) return c.error("curriculum", "enabled", kNoCurriculum);
    return parse_stack_layers(c, t);
  };
  const auto stack_record = f.model_record;
  f.model_record = [stack_record](const TrainConfig& cfg, std::map<std::string, std::string>& r) {
    stack_record(cfg, r);
    r["type_vocab_size"] = absl::StrCat(cfg.model.type_vocab_size);
    r["bert_binary_head"] = record_bool(cfg.model.binary_head);
  };
  return f;
}

}  // namespace anvil::model
