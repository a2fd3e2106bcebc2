// Hugging Face LlamaForCausalLM <-> anvil's GPT with rotary positions over the whole head
// (rotate_half, HF's layout of q_proj/k_proj), RMSNorm, SwiGLU, no biases, and an LM head tied
// or not (tie_word_embeddings). anvil fuses what LLaMA keeps apart: c_attn = [q_proj; k_proj;
// v_proj] and c_fc = [gate_proj; up_proj] (rows; the gate is the activation's input). Grouped-
// query attention (num_key_value_heads < num_attention_heads) is not implemented: import
// refuses it, export writes num_key_value_heads = num_attention_heads.
#include "model/checkpoint_hf.h"

namespace anvil::model {

using engine::ConfigType;

const HfFamily& llama_hf_family() {
  static const HfFamily f = [] {
    HfFamily g;
    g.model_type = "llama";
    g.architecture = "LlamaForCausalLM";
    g.prefix = "model.";
    g.unprefixed = {"lm_head.weight"};
    const HfLayout same = HfLayout::kSame;
    const std::string l = "layers.{i}.";
    g.tensors = {
        {"wte.weight", {"embed_tokens.weight"}, same},
        {"h.{i}.ln_1.weight", {l + "input_layernorm.weight"}, same},
        {"h.{i}.attn.c_attn.weight",
         {l + "self_attn.q_proj.weight", l + "self_attn.k_proj.weight",
          l + "self_attn.v_proj.weight"},
         same},
        {"h.{i}.attn.c_proj.weight", {l + "self_attn.o_proj.weight"}, same},
        {"h.{i}.ln_2.weight", {l + "post_attention_layernorm.weight"}, same},
        {"h.{i}.mlp.c_fc.weight", {l + "mlp.gate_proj.weight", l + "mlp.up_proj.weight"}, same},
        {"h.{i}.mlp.c_proj.weight", {l + "mlp.down_proj.weight"}, same},
        {"ln_f.weight", {"norm.weight"}, same},
        {"lm_head.weight", {"lm_head.weight"}, same}};
    g.ignored_suffixes = {".rotary_emb.inv_freq"};  // a buffer older checkpoints saved
    g.tied_head_names = {"lm_head.weight"};
    g.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
                {"max_position_embeddings", "max_seq_len", ConfigType::kInt},
                {"hidden_size", "d_model", ConfigType::kInt},
                {"num_hidden_layers", "n_layers", ConfigType::kInt},
                {"num_attention_heads", "n_heads", ConfigType::kInt},
                {"num_key_value_heads", "n_heads", ConfigType::kInt},  // no GQA: must agree
                {"intermediate_size", "ffn_hidden", ConfigType::kInt, false, /*zero_is_4d=*/true},
                {"rms_norm_eps", "ln_eps", ConfigType::kFloat},
                {"initializer_range", "init_std", ConfigType::kFloat},
                {"rope_theta", "rotary_base", ConfigType::kFloat},
                {"attention_dropout", "attention_dropout", ConfigType::kFloat},
                {"tie_word_embeddings", "tie_embeddings", ConfigType::kBool}};
    g.fixed = {{"hidden_act", "\"silu\""},
               {"attention_bias", "false"},
               {"mlp_bias", "false"},
               {"rope_scaling", "null"},
               {"pretraining_tp", "1"}};
    g.settings = {
        {"position_embedding", "rotary"}, {"rotary_percent", "1.0"}, {"embed_layernorm", "false"},
        {"activation", "swiglu"},         {"norm", "rmsnorm"},       {"bias", "false"}};
    // LlamaConfig's defaults for fields a config.json may leave out (anvil's differ).
    g.import_defaults = {{"tie_embeddings", "false"}, {"ln_eps", "1e-06"}};
    return g;
  }();
  return f;
}

}  // namespace anvil::model
