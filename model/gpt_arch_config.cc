// [model] architecture keys: schema entries (with the Megatron-DeepSpeed flag each matches) and
// their parsing into GptConfig.
#include "model/gpt_arch_config.h"

#include <string>
#include <utility>

namespace anvil::model {

namespace {

constexpr std::pair<PositionEmbedding, const char*> kPositionNames[] = {
    {PositionEmbedding::kLearned, "learned"},
    {PositionEmbedding::kAlibi, "alibi"},
    {PositionEmbedding::kNone, "none"},
};

}  // namespace

std::string_view position_embedding_name(PositionEmbedding p) {
  for (const auto& [value, name] : kPositionNames) {
    if (value == p) return name;
  }
  return "?";
}

void add_gpt_arch_schema(engine::ConfigSchema& s) {
  using engine::ConfigType;
  s.add("model", "position_embedding", ConfigType::kString, "learned",
        "How attention sees positions (--position-embedding-type): learned = a table wpe of "
        "max_seq_len rows added to the word embedding (GPT-2); alibi = BLOOM's linear bias "
        "slope_h * (j - i) on the attention logits (Megatron's slopes of the global head, also "
        "under tensor parallelism; needs flash attention: the CPU, or CUDA bf16 with head_dim 64 "
        "or 128); none = no position information besides the causal mask.",
        {"learned", "alibi", "none"});
  s.add("model", "embed_layernorm", ConfigType::kBool, "false",
        "BLOOM's LayerNorm wte_ln right after the word embedding, before the embedding dropout "
        "(--embed-layernorm); needs position_embedding alibi or none.");
  s.add("model", "bias", ConfigType::kBool, "true",
        "Biases in every linear layer (c_attn, attn c_proj, c_fc, mlp c_proj); false = none, as "
        "LLaMA (--disable-bias-linear).");
  s.add("model", "tie_embeddings", ConfigType::kBool, "true",
        "LM head tied to the word embedding wte (GPT-2, BLOOM); false = a separate "
        "lm_head.weight [padded vocabulary, d_model], vocab-parallel under tensor parallelism "
        "(LLaMA; --untie-embeddings-and-output-weights).");
}

void parse_gpt_arch(const engine::Config& c, GptConfig& m) {
  const std::string position = c.get_string("model", "position_embedding");
  for (const auto& [value, name] : kPositionNames) {
    if (position == name) m.position_embedding = value;
  }
  m.embed_layernorm = c.get_bool("model", "embed_layernorm");
  m.bias = c.get_bool("model", "bias");
  m.tie_embeddings = c.get_bool("model", "tie_embeddings");
}

}  // namespace anvil::model
