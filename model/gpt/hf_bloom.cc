// Hugging Face BloomForCausalLM <-> anvil's GPT with ALiBi, an embedding LayerNorm, GELU (tanh,
// HF's bloom_gelu_forward), LayerNorm, biases and a tied LM head (FFN 4 d, no maximum sequence
// length in config.json: import writes 2048, BLOOM's training length).
// BLOOM's fused query_key_value keeps q, k, v per head (rows [heads][3][head_dim]); anvil's
// c_attn keeps q of all heads, then k, then v (rows [3][heads][head_dim], GPT-2's order): the
// rows are permuted both ways (weight and bias). nn.Linear weights are [out, in] like anvil's.
// Hub checkpoints store the names with or without "transformer.".
#include "model/checkpoint_hf.h"

namespace anvil::model {

using engine::ConfigType;

const HfFamily& bloom_hf_family() {
  static const HfFamily f = [] {
    HfFamily g;
    g.model_type = "bloom";
    g.architecture = "BloomForCausalLM";
    g.prefix = "transformer.";
    const HfLayout same = HfLayout::kSame;
    g.tensors = {{"wte.weight", {"word_embeddings.weight"}, same},
                 {"wte_ln.weight", {"word_embeddings_layernorm.weight"}, same},
                 {"wte_ln.bias", {"word_embeddings_layernorm.bias"}, same},
                 {"ln_f.weight", {"ln_f.weight"}, same},
                 {"ln_f.bias", {"ln_f.bias"}, same}};
    const char* const names[][2] = {{"ln_1", "input_layernorm"},
                                    {"attn.c_proj", "self_attention.dense"},
                                    {"ln_2", "post_attention_layernorm"},
                                    {"mlp.c_fc", "mlp.dense_h_to_4h"},
                                    {"mlp.c_proj", "mlp.dense_4h_to_h"}};
    for (const auto& [anvil, hf] : names) {
      for (const char* p : {".weight", ".bias"}) {
        g.tensors.push_back(
            {std::string("h.{i}.") + anvil + p, {std::string("h.{i}.") + hf + p}, same});
      }
    }
    for (const char* p : {".weight", ".bias"}) {
      g.tensors.push_back({std::string("h.{i}.attn.c_attn") + p,
                           {std::string("h.{i}.self_attention.query_key_value") + p},
                           HfLayout::kHeadsInterleaved});
    }
    g.tied_head_names = {"lm_head.weight"};
    g.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
                {"hidden_size", "d_model", ConfigType::kInt},
                {"n_embed", "d_model", ConfigType::kInt},  // older configs' name
                {"n_layer", "n_layers", ConfigType::kInt},
                {"n_head", "n_heads", ConfigType::kInt},
                {"layer_norm_epsilon", "ln_eps", ConfigType::kFloat},
                {"initializer_range", "init_std", ConfigType::kFloat},
                {"hidden_dropout", "hidden_dropout", ConfigType::kFloat},
                {"attention_dropout", "attention_dropout", ConfigType::kFloat}};
    g.fixed = {{"apply_residual_connection_post_layernorm", "false"},
               {"slow_but_exact", "false"},
               {"tie_word_embeddings", "true"}};
    g.settings = {{"position_embedding", "alibi"},
                  {"embed_layernorm", "true"},
                  {"activation", "gelu"},
                  {"norm", "layernorm"},
                  {"bias", "true"},
                  {"tie_embeddings", "true"},
                  {"ffn_hidden", "0"}};
    g.import_defaults = {{"max_seq_len", "2048"}};
    return g;
  }();
  return f;
}

}  // namespace anvil::model
