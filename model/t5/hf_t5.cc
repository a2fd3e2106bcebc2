// Hugging Face T5ForConditionalGeneration <-> anvil's T5 (model/t5/t5.h), two families of
// model_type "t5": v1.0 (feed_forward_proj relu, the LM head tied to `shared`) and v1.1
// (gated-gelu, an untied lm_head). anvil's names are HF's except its three fused matrices, whose
// rows are HF tensors stacked: SelfAttention.qkv = [q; k; v], EncDecAttention.kv = [k; v] and
// (v1.1) DenseReluDense.wi = [wi_0; wi_1]. HF's encoder/decoder embed_tokens are `shared` again
// and are not imported (an error when they differ from it: transformers 5 unties them in a fresh
// model with tie_word_embeddings false); v1.0's lm_head.weight (tied) neither.
#include <string>

#include "model/checkpoint_hf.h"

namespace anvil::model {
namespace {

using engine::ConfigType;

// The rules of one stack's blocks: "encoder" (self-attention, FFN in layer.1) or "decoder"
// (self-, cross-attention, FFN in layer.2).
void add_stack(HfFamily& f, const std::string& stack, bool gated) {
  const std::string b = stack + ".block.{i}.";
  const HfLayout same = HfLayout::kSame;
  const std::string self = b + "layer.0.SelfAttention.";
  f.tensors.push_back(
      {self + "qkv.weight", {self + "q.weight", self + "k.weight", self + "v.weight"}, same});
  f.tensors.push_back({self + "o.weight", {self + "o.weight"}, same});
  const std::string rel = self + "relative_attention_bias.weight";  // block 0 only
  f.tensors.push_back({rel, {rel}, same});
  f.tensors.push_back({b + "layer.0.layer_norm.weight", {b + "layer.0.layer_norm.weight"}, same});
  std::string ff = b + "layer.1.";
  if (stack == "decoder") {
    const std::string x = b + "layer.1.EncDecAttention.";
    f.tensors.push_back({x + "q.weight", {x + "q.weight"}, same});
    f.tensors.push_back({x + "kv.weight", {x + "k.weight", x + "v.weight"}, same});
    f.tensors.push_back({x + "o.weight", {x + "o.weight"}, same});
    f.tensors.push_back({b + "layer.1.layer_norm.weight", {b + "layer.1.layer_norm.weight"}, same});
    ff = b + "layer.2.";
  }
  const std::string d = ff + "DenseReluDense.";
  if (gated) {
    f.tensors.push_back({d + "wi.weight", {d + "wi_0.weight", d + "wi_1.weight"}, same});
  } else {
    f.tensors.push_back({d + "wi.weight", {d + "wi.weight"}, same});
  }
  f.tensors.push_back({d + "wo.weight", {d + "wo.weight"}, same});
  f.tensors.push_back({ff + "layer_norm.weight", {ff + "layer_norm.weight"}, same});
}

HfFamily t5_family(bool v11) {
  HfFamily f;
  f.model_type = "t5";
  f.architecture = "T5ForConditionalGeneration";
  const HfLayout same = HfLayout::kSame;
  f.tensors = {{"shared.weight", {"shared.weight"}, same},
               {"encoder.final_layer_norm.weight", {"encoder.final_layer_norm.weight"}, same},
               {"decoder.final_layer_norm.weight", {"decoder.final_layer_norm.weight"}, same}};
  if (v11) f.tensors.push_back({"lm_head.weight", {"lm_head.weight"}, same});
  add_stack(f, "encoder", v11);
  add_stack(f, "decoder", v11);
  f.copies = {{"encoder.embed_tokens.weight", "shared.weight"},
              {"decoder.embed_tokens.weight", "shared.weight"}};
  if (!v11) f.tied_head_names = {"lm_head.weight"};
  f.config = {{"vocab_size", "vocab_size", ConfigType::kInt},
              {"d_model", "d_model", ConfigType::kInt},
              {"d_kv", "d_kv", ConfigType::kInt},
              {"num_heads", "n_heads", ConfigType::kInt},
              {"d_ff", "ffn_hidden", ConfigType::kInt, false, /*zero_is_4d=*/true},
              {"num_layers", "n_layers", ConfigType::kInt},
              {"num_decoder_layers", "decoder_layers", ConfigType::kInt, /*zero_is_null=*/true},
              {"relative_attention_num_buckets", "relative_buckets", ConfigType::kInt},
              {"relative_attention_max_distance", "relative_max_distance", ConfigType::kInt},
              {"dropout_rate", "hidden_dropout", ConfigType::kFloat},
              {"layer_norm_epsilon", "ln_eps", ConfigType::kFloat}};
  f.config[2].zero_is_per_head = true;  // d_kv 0: d_model / n_heads
  f.fixed = {{"feed_forward_proj", v11 ? "\"gated-gelu\"" : "\"relu\""},
             {"tie_word_embeddings", v11 ? "false" : "true"},
             {"is_encoder_decoder", "true"}};
  f.settings = {{"type", "t5"}, {"t5_version", v11 ? "1.1" : "1.0"}};
  f.import_overrides = {"tokenizer.type=Byte", "tokenizer.vocab_extra_ids=100"};
  f.eod_is_eos = false;
  return f;
}

}  // namespace

const HfFamily& t5_v10_hf_family() {
  static const HfFamily f = t5_family(false);
  return f;
}

const HfFamily& t5_v11_hf_family() {
  static const HfFamily f = t5_family(true);
  return f;
}

}  // namespace anvil::model
