// Hugging Face GPT2LMHeadModel <-> anvil's GPT with learned positions, GELU (tanh), LayerNorm,
// biases and a tied LM head. anvil's names are HF GPT-2's own, under "transformer."; HF's Conv1D
// weights are [in, out], so those four are transposed. The tied lm_head.weight and the
// causal-mask buffers (attn.bias, attn.masked_bias) are not imported.
#include "model/checkpoint_hf.h"

namespace anvil::model {

using engine::ConfigType;

const HfFamily& gpt2_hf_family() {
  static const HfFamily f = [] {
    HfFamily g;
    g.model_type = "gpt2";
    g.architecture = "GPT2LMHeadModel";
    g.prefix = "transformer.";
    const HfLayout same = HfLayout::kSame, conv1d = HfLayout::kTransposed;
    g.tensors = {{"wte.weight", {"wte.weight"}, same},
                 {"wpe.weight", {"wpe.weight"}, same},
                 {"ln_f.weight", {"ln_f.weight"}, same},
                 {"ln_f.bias", {"ln_f.bias"}, same}};
    for (const char* ln : {"ln_1", "ln_2"}) {
      for (const char* p : {".weight", ".bias"}) {
        const std::string n = std::string("h.{i}.") + ln + p;
        g.tensors.push_back({n, {n}, same});
      }
    }
    for (const char* lin : {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}) {
      const std::string n = std::string("h.{i}.") + lin;
      g.tensors.push_back({n + ".weight", {n + ".weight"}, conv1d});
      g.tensors.push_back({n + ".bias", {n + ".bias"}, same});
    }
    g.ignored_suffixes = {".attn.bias", ".attn.masked_bias"};
    g.tied_head_names = {"lm_head.weight"};
    g.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
                {"n_positions", "max_seq_len", ConfigType::kInt},
                {"n_embd", "d_model", ConfigType::kInt},
                {"n_layer", "n_layers", ConfigType::kInt},
                {"n_head", "n_heads", ConfigType::kInt},
                {"n_inner", "ffn_hidden", ConfigType::kInt, /*zero_is_null=*/true},
                {"layer_norm_epsilon", "ln_eps", ConfigType::kFloat},
                {"initializer_range", "init_std", ConfigType::kFloat},
                {"resid_pdrop", "hidden_dropout", ConfigType::kFloat},
                {"embd_pdrop", "hidden_dropout", ConfigType::kFloat},
                {"attn_pdrop", "attention_dropout", ConfigType::kFloat}};
    g.fixed = {{"activation_function", "\"gelu_new\""},
               {"tie_word_embeddings", "true"},
               {"scale_attn_weights", "true"},
               {"scale_attn_by_inverse_layer_idx", "false"},
               {"reorder_and_upcast_attn", "false"}};
    g.settings = {{"position_embedding", "learned"},
                  {"embed_layernorm", "false"},
                  {"activation", "gelu"},
                  {"norm", "layernorm"},
                  {"bias", "true"},
                  {"tie_embeddings", "true"}};
    return g;
  }();
  return f;
}

}  // namespace anvil::model
