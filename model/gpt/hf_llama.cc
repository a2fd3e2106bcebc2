// Hugging Face LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM <-> anvil's GPT with
// rotary positions over the whole head (rotate_half, HF's layout of q_proj/k_proj), RMSNorm,
// SwiGLU, an LM head tied or not (tie_word_embeddings) and grouped-query attention
// (num_key_value_heads -> [model] n_kv_heads). anvil fuses what they keep apart: c_attn = q_proj,
// k_proj, v_proj (stacked, or in Megatron-core's grouped order when kv heads < heads:
// HfLayout::kGroupedQkv) and c_fc = [gate_proj; up_proj] (rows; the gate is the activation's
// input). The three differ in:
//   llama:   no biases; rope_scaling (linear, llama3) <-> [model] rope_scaling*.
//   mistral: no biases, no rope_scaling; sliding_window <-> [model] sliding_window (not
//            implemented as a window: runs must be no longer than it, train_config.cc).
//   qwen2:   biases on q/k/v_proj only ([model] qkv_bias); use_sliding_window must be false
//            (its sliding_window field is then unused by HF and ignored here); rope_scaling.
#include "model/checkpoint_hf.h"

namespace anvil::model {

namespace {

using engine::ConfigType;

// What the three families share; `qkv_bias` adds q/k/v_proj.bias.
HfFamily llama_like(bool qkv_bias) {
  HfFamily g;
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
       HfLayout::kGroupedQkv},
      {"h.{i}.attn.c_proj.weight", {l + "self_attn.o_proj.weight"}, same},
      {"h.{i}.ln_2.weight", {l + "post_attention_layernorm.weight"}, same},
      {"h.{i}.mlp.c_fc.weight", {l + "mlp.gate_proj.weight", l + "mlp.up_proj.weight"}, same},
      {"h.{i}.mlp.c_proj.weight", {l + "mlp.down_proj.weight"}, same},
      {"ln_f.weight", {"norm.weight"}, same},
      {"lm_head.weight", {"lm_head.weight"}, same}};
  if (qkv_bias) {
    g.tensors.push_back(
        {"h.{i}.attn.c_attn.bias",
         {l + "self_attn.q_proj.bias", l + "self_attn.k_proj.bias", l + "self_attn.v_proj.bias"},
         HfLayout::kGroupedQkv});
  }
  g.ignored_suffixes = {".rotary_emb.inv_freq"};  // a buffer older checkpoints saved
  g.tied_head_names = {"lm_head.weight"};
  g.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
              {"max_position_embeddings", "max_seq_len", ConfigType::kInt},
              {"hidden_size", "d_model", ConfigType::kInt},
              {"num_hidden_layers", "n_layers", ConfigType::kInt},
              {"num_attention_heads", "n_heads", ConfigType::kInt},
              {"num_key_value_heads", "n_kv_heads", ConfigType::kInt, false, false, false,
               /*zero_is_heads=*/true},
              {"intermediate_size", "ffn_hidden", ConfigType::kInt, false, /*zero_is_4d=*/true},
              {"rms_norm_eps", "ln_eps", ConfigType::kFloat},
              {"initializer_range", "init_std", ConfigType::kFloat},
              {"rope_theta", "rotary_base", ConfigType::kFloat},
              {"attention_dropout", "attention_dropout", ConfigType::kFloat},
              {"tie_word_embeddings", "tie_embeddings", ConfigType::kBool}};
  g.fixed = {{"hidden_act", "\"silu\""}};
  g.settings = {{"position_embedding", "rotary"},
                {"rotary_percent", "1.0"},
                {"embed_layernorm", "false"},
                {"activation", "swiglu"},
                {"norm", "rmsnorm"},
                {"bias", "false"},
                {"qkv_bias", qkv_bias ? "true" : "false"}};
  return g;
}

}  // namespace

const HfFamily& llama_hf_family() {
  static const HfFamily f = [] {
    HfFamily g = llama_like(/*qkv_bias=*/false);
    g.model_type = "llama";
    g.architecture = "LlamaForCausalLM";
    g.fixed.insert(g.fixed.end(),
                   {{"attention_bias", "false"}, {"mlp_bias", "false"}, {"pretraining_tp", "1"}});
    g.settings.push_back({"sliding_window", "0"});
    g.rope_scaling = true;
    // LlamaConfig's defaults for fields a config.json may leave out (anvil's differ).
    g.import_defaults = {{"tie_embeddings", "false"}, {"ln_eps", "1e-06"}};
    return g;
  }();
  return f;
}

const HfFamily& mistral_hf_family() {
  static const HfFamily f = [] {
    HfFamily g = llama_like(/*qkv_bias=*/false);
    g.model_type = "mistral";
    g.architecture = "MistralForCausalLM";
    g.config.push_back(
        {"sliding_window", "sliding_window", ConfigType::kInt, /*zero_is_null=*/true});
    g.fixed.push_back({"rope_scaling", "null"});
    g.settings.push_back({"rope_scaling", "none"});
    // MistralConfig's defaults (anvil's differ; sliding_window 4096 applies only to a
    // config.json without the field, which transformers itself writes).
    g.import_defaults = {{"tie_embeddings", "false"},
                         {"ln_eps", "1e-06"},
                         {"max_seq_len", "131072"},
                         {"sliding_window", "4096"}};
    return g;
  }();
  return f;
}

const HfFamily& qwen2_hf_family() {
  static const HfFamily f = [] {
    HfFamily g = llama_like(/*qkv_bias=*/true);
    g.model_type = "qwen2";
    g.architecture = "Qwen2ForCausalLM";
    g.fixed.push_back({"use_sliding_window", "false"});
    g.settings.push_back({"sliding_window", "0"});
    g.rope_scaling = true;
    // Qwen2Config's defaults (anvil's differ).
    g.import_defaults = {
        {"tie_embeddings", "false"}, {"ln_eps", "1e-06"}, {"max_seq_len", "32768"}};
    return g;
  }();
  return f;
}

}  // namespace anvil::model
