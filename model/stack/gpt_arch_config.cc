// [model] architecture keys: schema entries (with the Megatron-DeepSpeed flag each matches) and
// their parsing into GptConfig.
#include "model/stack/gpt_arch_config.h"

#include <string>
#include <utility>
#include <vector>

namespace anvil::model {

namespace {

constexpr std::pair<PositionEmbedding, const char*> kPositionNames[] = {
    {PositionEmbedding::kLearned, "learned"},
    {PositionEmbedding::kAlibi, "alibi"},
    {PositionEmbedding::kRotary, "rotary"},
    {PositionEmbedding::kNone, "none"},
};

constexpr std::pair<Activation, const char*> kActivationNames[] = {
    {Activation::kGelu, "gelu"},   {Activation::kSwiglu, "swiglu"},
    {Activation::kGeglu, "geglu"}, {Activation::kReglu, "reglu"},
    {Activation::kLiglu, "liglu"}, {Activation::kGeluErf, "gelu_erf"},
};

constexpr std::pair<NormPlacement, const char*> kPlacementNames[] = {
    {NormPlacement::kPre, "pre"},
    {NormPlacement::kPost, "post"},
};

constexpr std::pair<ops::RotaryScalingType, const char*> kRopeScalingNames[] = {
    {ops::RotaryScalingType::kNone, "none"},
    {ops::RotaryScalingType::kLinear, "linear"},
    {ops::RotaryScalingType::kLlama3, "llama3"},
};

constexpr std::pair<Norm, const char*> kNormNames[] = {
    {Norm::kLayerNorm, "layernorm"},
    {Norm::kRmsNorm, "rmsnorm"},
};

// The enum value named `name` (the schema admits only listed names).
template <typename E, size_t N>
E from_name(const std::pair<E, const char*> (&names)[N], const std::string& name) {
  for (const auto& [value, n] : names) {
    if (name == n) return value;
  }
  return names[0].first;
}

template <typename E, size_t N>
std::vector<std::string> all_names(const std::pair<E, const char*> (&names)[N]) {
  std::vector<std::string> out;
  for (const auto& [value, n] : names) out.push_back(n);
  return out;
}

}  // namespace

void add_gpt_arch_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("model", "norm_placement", ConfigType::kString, "pre",
        "pre = x + f(LN(x)) with a final ln_f (GPT-2, Megatron); post = LN(x + f(x)) without "
        "ln_f (original BERT / HF BertModel; Megatron-DeepSpeed has no such option).",
        all_names(kPlacementNames));
  s.add("model", "type_vocab_size", ConfigType::kInt, "2",
        "type bert: rows of the token-type embedding tokentype_embeddings.weight "
        "(--num-tokentypes; the segment ids A = 0, B = 1). Ignored by gpt.");
  s.add("model", "bert_binary_head", ConfigType::kBool, "true",
        "type bert: the pooler (dense + tanh on [CLS]) and the 2-way binary head trained on the "
        "sentence-order label (Megatron's default; false = --bert-no-binary-head: the data then "
        "makes single-segment samples).");
  s.add("model", "position_embedding", ConfigType::kString, "learned",
        "How attention sees positions (--position-embedding-type): learned = a table wpe of "
        "max_seq_len rows added to the word embedding (GPT-2); alibi = BLOOM's linear bias "
        "slope_h * (j - i) on the attention logits (Megatron's slopes of the global head, also "
        "under tensor parallelism); rotary = RoPE on q and k at the position ids (LLaMA, HF "
        "rotate_half layout); none = only the causal mask. alibi and rotary need flash attention: "
        "the CPU, or CUDA with bf16 or fp16 and head_dim a multiple of 8 in [32, 256].",
        all_names(kPositionNames));
  s.add("model", "rotary_base", ConfigType::kFloat, "10000",
        "Rotary: inv_freq_i = rotary_base^(-2i / rot_dim) (--rotary-base; LLaMA 10000).");
  s.add("model", "rope_scaling", ConfigType::kString, "none",
        "Rotary: HF rope_scaling of the frequencies (ops/rotary.h): none; linear = inv_freq / "
        "rope_scaling_factor (positions divided by the factor); llama3 = Llama 3.1's "
        "(transformers' _compute_llama3_parameters): wavelengths 2 pi / inv_freq longer than "
        "rope_original_max_position / rope_low_freq_factor divided by the factor, shorter than "
        "rope_original_max_position / rope_high_freq_factor kept, those between interpolated.",
        all_names(kRopeScalingNames));
  s.add("model", "rope_scaling_factor", ConfigType::kFloat, "1.0",
        "rope_scaling linear / llama3: the factor (HF rope_scaling.factor; Llama 3.1: 8).");
  s.add("model", "rope_low_freq_factor", ConfigType::kFloat, "1.0",
        "rope_scaling llama3: low_freq_factor (Llama 3.1: 1).");
  s.add("model", "rope_high_freq_factor", ConfigType::kFloat, "4.0",
        "rope_scaling llama3: high_freq_factor, > rope_low_freq_factor (Llama 3.1: 4).");
  s.add("model", "rope_original_max_position", ConfigType::kInt, "8192",
        "rope_scaling llama3: original_max_position_embeddings (Llama 3.1: 8192).");
  s.add("model", "sliding_window", ConfigType::kInt, "0",
        "Mistral's sliding-window attention span (HF sliding_window); 0 = none. Not implemented "
        "as a window: [data] seq_len (and an inference max_len) must be <= it, where the window "
        "never hides a key and attention is the full causal one; kept so export writes it back.");
  s.add("model", "rotary_percent", ConfigType::kFloat, "1.0",
        "Rotary: the first rot_dim = rotary_percent * head_dim dims of each head rotate, the rest "
        "pass through (--rotary-percent; GPT-NeoX 0.25); rot_dim must be even.");
  s.add("model", "embed_layernorm", ConfigType::kBool, "false",
        "BLOOM's LayerNorm wte_ln right after the word embedding, before the embedding dropout "
        "(--embed-layernorm); always a LayerNorm; needs position_embedding alibi, rotary or none, "
        "except with type bert, where it normalizes word + position + token-type embeddings "
        "(HF BERT's embeddings.LayerNorm).");
  s.add("model", "activation", ConfigType::kString, "gelu",
        "MLP activation: gelu (tanh approximation, GPT-2 / BLOOM), gelu_erf (exact erf GELU, HF "
        "BERT's \"gelu\") or a gated unit act(g) * u "
        "(--glu-activation; swiglu = LLaMA, geglu with exact erf GELU, reglu, liglu = identity). "
        "As in Megatron-DeepSpeed, ffn_hidden is the width after the gate: with a gated unit c_fc "
        "has 2 * ffn_hidden outputs [g | u] (mlp.c_fc.weight [2 * ffn_hidden, d_model], g rows "
        "first), so LLaMA's intermediate_size is ffn_hidden (the 4 * d_model default then makes "
        "the MLP 1.5x wider than GELU's).",
        all_names(kActivationNames));
  s.add("model", "norm", ConfigType::kString, "layernorm",
        "Normalization of the blocks and ln_f: layernorm (gamma, beta) or rmsnorm (gamma only, "
        "LLaMA; --normalization RMSNorm); both use ln_eps.",
        all_names(kNormNames));
  s.add("model", "bias", ConfigType::kBool, "true",
        "Biases in every linear layer (c_attn, attn c_proj, c_fc, mlp c_proj); false = none, as "
        "LLaMA (--disable-bias-linear).");
  s.add("model", "qkv_bias", ConfigType::kBool, "false",
        "A bias on c_attn (the q, k, v projections) even with bias = false (Qwen2: q/k/v_proj "
        "have biases, o_proj and the MLP none; Megatron's --add-qkv-bias). Split over TP with "
        "c_attn's rows.");
  s.add("model", "tie_embeddings", ConfigType::kBool, "true",
        "LM head tied to the word embedding wte (GPT-2, BLOOM); false = a separate "
        "lm_head.weight [padded vocabulary, d_model], vocab-parallel under tensor parallelism "
        "(LLaMA; --untie-embeddings-and-output-weights).");
}

void parse_gpt_arch(const engine::Config& c, GptConfig& m) {
  m.position_embedding = from_name(kPositionNames, c.get_string("model", "position_embedding"));
  m.rotary_base = static_cast<float>(c.get_float("model", "rotary_base"));
  m.rotary_percent = static_cast<float>(c.get_float("model", "rotary_percent"));
  m.rope_scaling.type = from_name(kRopeScalingNames, c.get_string("model", "rope_scaling"));
  m.rope_scaling.factor = static_cast<float>(c.get_float("model", "rope_scaling_factor"));
  m.rope_scaling.low_freq_factor = static_cast<float>(c.get_float("model", "rope_low_freq_factor"));
  m.rope_scaling.high_freq_factor =
      static_cast<float>(c.get_float("model", "rope_high_freq_factor"));
  m.rope_scaling.original_max_position = c.get_int("model", "rope_original_max_position");
  m.sliding_window = c.get_int("model", "sliding_window");
  m.embed_layernorm = c.get_bool("model", "embed_layernorm");
  m.activation = from_name(kActivationNames, c.get_string("model", "activation"));
  m.norm = from_name(kNormNames, c.get_string("model", "norm"));
  m.bias = c.get_bool("model", "bias");
  m.qkv_bias = c.get_bool("model", "qkv_bias");
  m.tie_embeddings = c.get_bool("model", "tie_embeddings");
  m.norm_placement = from_name(kPlacementNames, c.get_string("model", "norm_placement"));
  // The encoder features (causal, head, type_vocab_size, binary_head) keep their defaults: a
  // family that uses them sets them (Family::model_features, model/train/family.h).
}

}  // namespace anvil::model
