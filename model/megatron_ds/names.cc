// The fork's BLOOM tensor names and layouts <-> anvil's (model/megatron_ds/names.h).
#include "model/megatron_ds/names.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace anvil::model {
namespace {

// Rows [heads][3][hd] (x cols) -> [3][heads][hd].
std::vector<float> qkv_to_anvil(const std::vector<float>& v, int64_t heads, int64_t hd,
                                int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t e = 0; e < hd; ++e) {
        const int64_t src = (h * 3 + j) * hd + e, dst = (j * heads + h) * hd + e;
        std::copy(v.begin() + src * cols, v.begin() + (src + 1) * cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

// Rows [3][heads][hd] (x cols) -> [heads][3][hd]: the inverse of qkv_to_anvil.
std::vector<float> qkv_to_fork(const std::vector<float>& v, int64_t heads, int64_t hd,
                               int64_t cols) {
  std::vector<float> out(v.size());
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t j = 0; j < 3; ++j) {
      for (int64_t e = 0; e < hd; ++e) {
        const int64_t dst = (h * 3 + j) * hd + e, src = (j * heads + h) * hd + e;
        std::copy(v.begin() + src * cols, v.begin() + (src + 1) * cols, out.begin() + dst * cols);
      }
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<engine::HostSlice>> megatron_ds_to_anvil(
    const std::map<std::string, engine::HostSlice>& fork, const MegatronDsDims& dims) {
  const std::map<std::string, std::string> states = {
      {"fp32/", "master/"}, {"exp_avg/", "exp_avg/"}, {"exp_avg_sq/", "exp_avg_sq/"}};
  const std::map<std::string, std::string> fixed = {
      {"word_embeddings.norm.weight", "wte_ln.weight"},
      {"word_embeddings.norm.bias", "wte_ln.bias"},
      {"final_layernorm.weight", "ln_f.weight"},
      {"final_layernorm.bias", "ln_f.bias"}};
  const std::map<std::string, std::string> layer = {
      {"input_layernorm", "ln_1"},
      {"self_attention.query_key_value", "attn.c_attn"},
      {"self_attention.dense", "attn.c_proj"},
      {"post_attention_layernorm", "ln_2"},
      {"mlp.dense_h_to_4h", "mlp.c_fc"},
      {"mlp.dense_4h_to_h", "mlp.c_proj"}};
  std::vector<engine::HostSlice> out;
  for (const auto& [full, t] : fork) {
    const size_t slash = full.find('/');
    auto st = states.find(full.substr(0, slash + 1));
    if (slash == std::string::npos || st == states.end()) {
      return absl::InvalidArgumentError(absl::StrCat("Megatron-DeepSpeed tensor ", full,
                                                     ": no state fp32/, exp_avg/ or exp_avg_sq/"));
    }
    const std::string name = full.substr(slash + 1);
    engine::HostSlice s = t;
    if (name == "word_embeddings.weight") {
      if (t.shape.size() != 2 || t.shape[0] < dims.vocab) {
        return absl::InvalidArgumentError(absl::StrCat(
            full, ": ", t.shape[0], " rows cannot hold the vocabulary of ", dims.vocab));
      }
      s.tensor = "wte.weight";
      s.shape[0] = dims.vocab;
      s.data.resize(dims.vocab * t.shape[1]);
    } else if (auto f = fixed.find(name); f != fixed.end()) {
      s.tensor = f->second;
    } else {
      const std::vector<std::string> parts = absl::StrSplit(name, absl::MaxSplits('.', 2));
      const size_t last = name.rfind('.');
      auto l = parts.size() == 3 && parts[0] == "layers" && last != std::string::npos
                   ? layer.find(parts[2].substr(0, parts[2].rfind('.')))
                   : layer.end();
      if (l == layer.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Megatron-DeepSpeed tensor ", name, ": no rule maps it to anvil"));
      }
      s.tensor = absl::StrCat("h.", parts[1], ".", l->second, name.substr(last));
      if (l->first == "self_attention.query_key_value") {
        const int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 1;
        if (dims.heads <= 0 || rows % (3 * dims.heads) != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(name, ": ", rows, " rows do not split into 3 x ", dims.heads, " heads"));
        }
        s.data = qkv_to_anvil(t.data, dims.heads, rows / (3 * dims.heads), cols);
      }
    }
    s.tensor = st->second + s.tensor;
    s.offset.assign(s.shape.size(), 0);
    s.extent = s.shape;
    out.push_back(std::move(s));
  }
  return out;
}

absl::StatusOr<std::map<std::string, engine::HostSlice>> anvil_to_megatron_ds(
    const std::vector<engine::HostSlice>& anvil, const MegatronDsDims& dims, int64_t padded_vocab) {
  const std::map<std::string, std::string> states = {
      {"master/", "fp32/"}, {"exp_avg/", "exp_avg/"}, {"exp_avg_sq/", "exp_avg_sq/"}};
  const std::map<std::string, std::string> fixed = {
      {"wte_ln.weight", "word_embeddings.norm.weight"},
      {"wte_ln.bias", "word_embeddings.norm.bias"},
      {"ln_f.weight", "final_layernorm.weight"},
      {"ln_f.bias", "final_layernorm.bias"}};
  const std::map<std::string, std::string> layer = {
      {"ln_1", "input_layernorm"},
      {"attn.c_attn", "self_attention.query_key_value"},
      {"attn.c_proj", "self_attention.dense"},
      {"ln_2", "post_attention_layernorm"},
      {"mlp.c_fc", "mlp.dense_h_to_4h"},
      {"mlp.c_proj", "mlp.dense_4h_to_h"}};
  std::map<std::string, engine::HostSlice> out;
  for (const engine::HostSlice& t : anvil) {
    const size_t slash = t.tensor.find('/');
    auto st =
        slash == std::string::npos ? states.end() : states.find(t.tensor.substr(0, slash + 1));
    if (st == states.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("anvil tensor ", t.tensor, ": no state master/, exp_avg/ or exp_avg_sq/"));
    }
    if (t.extent != t.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("anvil tensor ", t.tensor, ": a slice, not the whole tensor"));
    }
    const std::string name = t.tensor.substr(slash + 1);
    engine::HostSlice s = t;
    if (name == "wte.weight") {
      if (t.shape.size() != 2 || padded_vocab < t.shape[0]) {
        return absl::InvalidArgumentError(absl::StrCat(t.tensor, ": ", t.shape[0],
                                                       " rows do not fit the padded vocabulary of ",
                                                       padded_vocab));
      }
      s.tensor = "word_embeddings.weight";
      s.shape[0] = padded_vocab;
      s.data.resize(static_cast<size_t>(padded_vocab * t.shape[1]), 0.0f);
    } else if (auto f = fixed.find(name); f != fixed.end()) {
      s.tensor = f->second;
    } else {
      // h.<i>.<module>.<weight|bias>
      const std::vector<std::string> parts = absl::StrSplit(name, absl::MaxSplits('.', 2));
      const size_t last = name.rfind('.');
      auto l = parts.size() == 3 && parts[0] == "h"
                   ? layer.find(parts[2].substr(0, parts[2].rfind('.')))
                   : layer.end();
      if (l == layer.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "anvil tensor ", name,
            ": no rule maps it to the fork's BLOOM GPTModelPipe (another model family?)"));
      }
      s.tensor = absl::StrCat("layers.", parts[1], ".", l->second, name.substr(last));
      if (l->first == "attn.c_attn") {
        const int64_t rows = t.shape[0], cols = t.shape.size() > 1 ? t.shape[1] : 1;
        if (dims.heads <= 0 || rows % (3 * dims.heads) != 0) {
          return absl::InvalidArgumentError(
              absl::StrCat(name, ": ", rows, " rows do not split into 3 x ", dims.heads, " heads"));
        }
        s.data = qkv_to_fork(t.data, dims.heads, rows / (3 * dims.heads), cols);
      }
    }
    s.tensor = st->second + s.tensor;
    s.offset.assign(s.shape.size(), 0);
    s.extent = s.shape;
    out[s.tensor] = std::move(s);
  }
  return out;
}

}  // namespace anvil::model
