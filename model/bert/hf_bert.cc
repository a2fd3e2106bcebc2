// Hugging Face BertForPreTraining <-> anvil's BERT in HF's layout (type bert, post-LN,
// GELU-erf, the embedding LayerNorm over word + position + token type, learned positions,
// biases, the MLM decoder tied to the word embedding, the binary head). HF keeps the attention
// projections apart: anvil's h.{i}.attn.c_attn = [query; key; value] by rows (weight [3d, d],
// bias [3d]; heads in order within each, as HF's view of the d outputs as [heads, head_dim]).
// Everything else is renamed only (nn.Linear weights are [out, in] on both sides). The tied
// decoder (cls.predictions.decoder.weight, and its bias, which is cls.predictions.bias) and the
// position_ids buffer of older checkpoints are not imported; LayerNorm.gamma / .beta (old
// checkpoints' names) import as .weight / .bias. Megatron's BERT layout (pre-LN)
// and BERT without the binary head (BertForMaskedLM) are not this family.
#include <string>
#include <utility>
#include <vector>

#include "model/checkpoint_hf.h"

namespace anvil::model {

using engine::ConfigType;

namespace {

// anvil's name of a linear or LayerNorm, HF's, each with ".weight" and ".bias".
void add_weight_bias(std::vector<HfTensorRule>& t, const std::string& anvil,
                     const std::string& hf) {
  for (const char* p : {".weight", ".bias"}) t.push_back({anvil + p, {hf + p}});
}

// Every BertForPreTraining tensor, base-model names without "bert.".
std::vector<HfTensorRule> bert_tensors() {
  const std::string l = "encoder.layer.{i}.", self = l + "attention.self.";
  std::vector<HfTensorRule> t = {
      {"wte.weight", {"embeddings.word_embeddings.weight"}},
      {"wpe.weight", {"embeddings.position_embeddings.weight"}},
      {"tokentype_embeddings.weight", {"embeddings.token_type_embeddings.weight"}}};
  add_weight_bias(t, "wte_ln", "embeddings.LayerNorm");
  for (const char* p : {".weight", ".bias"}) {
    t.push_back({std::string("h.{i}.attn.c_attn") + p,
                 {self + "query" + p, self + "key" + p, self + "value" + p}});
  }
  add_weight_bias(t, "h.{i}.attn.c_proj", l + "attention.output.dense");
  add_weight_bias(t, "h.{i}.ln_1", l + "attention.output.LayerNorm");
  add_weight_bias(t, "h.{i}.mlp.c_fc", l + "intermediate.dense");
  add_weight_bias(t, "h.{i}.mlp.c_proj", l + "output.dense");
  add_weight_bias(t, "h.{i}.ln_2", l + "output.LayerNorm");
  add_weight_bias(t, "pooler.dense", "pooler.dense");
  // The heads sit outside the base model (HfFamily::unprefixed).
  add_weight_bias(t, "lm_head.dense", "cls.predictions.transform.dense");
  add_weight_bias(t, "lm_head.layernorm", "cls.predictions.transform.LayerNorm");
  add_weight_bias(t, "binary_head", "cls.seq_relationship");
  t.push_back({"lm_head.bias", {"cls.predictions.bias"}});
  return t;
}

// Import also reads the LayerNorms' TF-era names (google-bert/bert-base-uncased's
// model.safetensors has LayerNorm.gamma / .beta): rules after the others, so export, which
// takes an anvil tensor's first rule, keeps writing .weight / .bias.
void add_old_layernorm_names(std::vector<HfTensorRule>& t) {
  const size_t n = t.size();
  for (size_t k = 0; k < n; ++k) {
    const HfTensorRule r = t[k];
    for (const auto& [now, old] : {std::pair{".LayerNorm.weight", ".LayerNorm.gamma"},
                                   std::pair{".LayerNorm.bias", ".LayerNorm.beta"}}) {
      const std::string& hf = r.hf[0];
      const size_t at = hf.rfind(now);
      if (at == std::string::npos || at + std::string(now).size() != hf.size()) continue;
      t.push_back({r.anvil, {hf.substr(0, at) + old}});
    }
  }
}

}  // namespace

const HfFamily& bert_hf_family() {
  static const HfFamily f = [] {
    HfFamily g;
    g.model_type = "bert";
    g.architecture = "BertForPreTraining";
    g.prefix = "bert.";
    g.tensors = bert_tensors();
    add_old_layernorm_names(g.tensors);
    for (const HfTensorRule& r : g.tensors) {
      if (r.hf[0].rfind("cls.", 0) == 0) g.unprefixed.push_back(r.hf[0]);
    }
    g.ignored_names = {"cls.predictions.decoder.bias"};
    g.ignored_suffixes = {"embeddings.position_ids"};
    g.tied_head_names = {"cls.predictions.decoder.weight"};
    g.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
                {"max_position_embeddings", "max_seq_len", ConfigType::kInt},
                {"hidden_size", "d_model", ConfigType::kInt},
                {"num_hidden_layers", "n_layers", ConfigType::kInt},
                {"num_attention_heads", "n_heads", ConfigType::kInt},
                {"intermediate_size", "ffn_hidden", ConfigType::kInt, false, /*zero_is_4d=*/true},
                {"type_vocab_size", "type_vocab_size", ConfigType::kInt},
                {"layer_norm_eps", "ln_eps", ConfigType::kFloat},
                {"initializer_range", "init_std", ConfigType::kFloat},
                {"hidden_dropout_prob", "hidden_dropout", ConfigType::kFloat},
                {"attention_probs_dropout_prob", "attention_dropout", ConfigType::kFloat}};
    g.fixed = {{"hidden_act", "\"gelu\""},  // HF's "gelu" is the exact erf form
               {"position_embedding_type", "\"absolute\""},
               {"tie_word_embeddings", "true"},
               {"is_decoder", "false"},
               {"add_cross_attention", "false"}};
    g.settings = {{"type", "bert"},
                  {"norm_placement", "post"},
                  {"bert_binary_head", "true"},
                  {"position_embedding", "learned"},
                  {"embed_layernorm", "true"},
                  {"activation", "gelu_erf"},
                  {"norm", "layernorm"},
                  {"bias", "true"},
                  {"tie_embeddings", "true"}};
    // BertConfig's defaults for fields a config.json may leave out (anvil's differ).
    g.import_defaults = {{"ln_eps", "1e-12"}, {"max_seq_len", "512"}};
    g.eod_is_eos = false;  // BertConfig's pad_token_id 0 stays
    return g;
  }();
  return f;
}

}  // namespace anvil::model
