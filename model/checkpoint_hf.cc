// The Hugging Face family tables and the name/layout mapping (see checkpoint_hf.h).
#include "model/checkpoint_hf.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anvil::model {

using engine::ConfigType;

const HfFamily& gpt2_hf_family() {
  static const HfFamily f = [] {
    HfFamily g;
    g.model_type = "gpt2";
    g.architecture = "GPT2LMHeadModel";
    g.prefix = "transformer.";
    g.transposed_suffixes = {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight",
                             ".mlp.c_proj.weight"};
    g.ignored_names = {"lm_head.weight"};
    g.ignored_suffixes = {".attn.bias", ".attn.masked_bias"};
    g.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
                {"n_positions", "max_seq_len", ConfigType::kInt},
                {"n_embd", "d_model", ConfigType::kInt},
                {"n_layer", "n_layers", ConfigType::kInt},
                {"n_head", "n_heads", ConfigType::kInt},
                {"n_inner", "ffn_hidden", ConfigType::kInt, true},
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
    return g;
  }();
  return f;
}

absl::StatusOr<const HfFamily*> hf_family(const std::string& model_type) {
  if (model_type == gpt2_hf_family().model_type) return &gpt2_hf_family();
  return absl::NotFoundError(
      absl::StrCat("model_type \"", model_type, "\" is not supported (supported: gpt2)"));
}

std::string to_hf_name(const HfFamily& f, const std::string& name) {
  return absl::StrCat(f.prefix, name);
}

std::optional<std::string> from_hf_name(const HfFamily& f, const std::string& hf_name) {
  for (const std::string& n : f.ignored_names) {
    if (hf_name == n) return std::nullopt;
  }
  for (const std::string& s : f.ignored_suffixes) {
    if (absl::EndsWith(hf_name, s)) return std::nullopt;
  }
  absl::string_view name = hf_name;
  absl::ConsumePrefix(&name, f.prefix);
  return std::string(name);
}

bool hf_transposed(const HfFamily& f, const std::string& name) {
  for (const std::string& s : f.transposed_suffixes) {
    if (absl::EndsWith(name, s)) return true;
  }
  return false;
}

engine::HostSlice transpose_2d(const engine::HostSlice& t) {
  if (t.shape.size() != 2) return t;
  const int64_t a = t.shape[0], b = t.shape[1];
  engine::HostSlice out{t.tensor, {b, a}, {0, 0}, {b, a}, std::vector<float>(t.data.size())};
  for (int64_t i = 0; i < a; ++i) {
    for (int64_t j = 0; j < b; ++j) {
      out.data[static_cast<size_t>(j * a + i)] = t.data[static_cast<size_t>(i * b + j)];
    }
  }
  return out;
}

}  // namespace anvil::model
