// Hugging Face T5 conversion (model/t5/hf_t5.cc through model/checkpoint_hf.h, hf_config.h):
//   - a tiny T5Model's checkpoint tensors (v1.0 and v1.1) export to HF's T5 names and shapes
//     (q, k, v; EncDecAttention k, v; v1.1 wi_0, wi_1 and lm_head) and import back bitwise
//     (v1.0: an lm_head in the HF file is the tied copy, skipped);
//   - a hand-built HF model.safetensors with known values, read as bin/convert import reads an
//     HF directory (io/hf_dir.h), imports to the fused tensors anvil expects
//     (rows of qkv = q, k, v; kv = k, v; wi = wi_0, wi_1), skipping embed_tokens; a missing
//     part is an error naming it;
//   - config.json: feed_forward_proj picks the version, the fields become [model] and back.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/hf_dir.h"
#include "io/safetensors.h"
#include "model/checkpoint_hf.h"
#include "model/hf_config.h"
#include "model/t5/t5_checkpoint.h"
#include "model/train/train_config.h"
#include "tests/io/io_test_util.h"

namespace anvil::model {
namespace {

using engine::HostSlice;
using ::testing::HasSubstr;

T5Config tiny(T5Version v) {
  T5Config c;
  c.vocab_size = 37;
  c.d_model = 8;
  c.d_kv = 2;
  c.n_heads = 2;
  c.d_ff = 6;
  c.n_encoder_layers = 2;
  c.n_decoder_layers = 1;
  c.num_buckets = 4;
  c.max_distance = 6;
  c.version = v;
  return c;
}

// The model's logical master tensors under their anvil names.
std::map<std::string, HostSlice> anvil_tensors(T5Version v) {
  engine::Stream s = engine::Stream::cpu();
  auto m = T5Model::create(tiny(v), {1, 4, 3}, Precision{}, 9);
  EXPECT_TRUE(m.ok()) << m.status();
  std::map<std::string, HostSlice> out;
  for (HostSlice& t : t5_checkpoint_slices(**m, 0, s)) {
    if (t.tensor.rfind(kMasterState, 0) != 0) continue;
    t.tensor = t.tensor.substr(std::string(kMasterState).size());
    out.emplace(t.tensor, std::move(t));
  }
  return out;
}

std::vector<HostSlice> values(const std::map<std::string, HostSlice>& m) {
  std::vector<HostSlice> v;
  for (const auto& [name, t] : m) v.push_back(t);
  return v;
}

class HfT5RoundTrip : public ::testing::TestWithParam<T5Version> {};

TEST_P(HfT5RoundTrip, ExportsHfNamesAndImportsBitwise) {
  const bool v11 = GetParam() == T5Version::kV1_1;
  const HfFamily& f = v11 ? t5_v11_hf_family() : t5_v10_hf_family();
  const std::map<std::string, HostSlice> anvil = anvil_tensors(GetParam());
  auto hf = to_hf_tensors(f, values(anvil), {2});
  ASSERT_TRUE(hf.ok()) << hf.status();
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const HostSlice& t : *hf) shapes[t.tensor] = t.shape;
  // HF's names and shapes (inner = 4, d = 8, d_ff = 6, vocab 37 without padding).
  const std::map<std::string, std::vector<int64_t>> want = {
      {"shared.weight", {37, 8}},
      {"encoder.block.1.layer.0.SelfAttention.q.weight", {4, 8}},
      {"encoder.block.1.layer.0.SelfAttention.v.weight", {4, 8}},
      {"encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight", {4, 2}},
      {"decoder.block.0.layer.1.EncDecAttention.k.weight", {4, 8}},
      {"decoder.block.0.layer.2.DenseReluDense.wo.weight", {8, 6}},
      {"decoder.final_layer_norm.weight", {8}}};
  for (const auto& [name, shape] : want) EXPECT_EQ(shapes[name], shape) << name;
  EXPECT_EQ(shapes.count(v11 ? "encoder.block.0.layer.1.DenseReluDense.wi_1.weight"
                             : "encoder.block.0.layer.1.DenseReluDense.wi.weight"),
            1u);
  EXPECT_EQ(shapes.count("lm_head.weight"), v11 ? 1u : 0u);
  EXPECT_EQ(shapes.count("encoder.block.1.layer.0.SelfAttention.relative_attention_bias.weight"),
            0u);  // block 0 only
  if (!v11) {     // HF files of tied models may hold lm_head (= shared): not imported
    HostSlice head = *std::find_if(hf->begin(), hf->end(),
                                   [](const HostSlice& t) { return t.tensor == "shared.weight"; });
    head.tensor = "lm_head.weight";
    hf->push_back(head);
  }
  auto back = from_hf_tensors(f, *hf, {2}, !v11);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), anvil.size());
  for (const HostSlice& t : *back) {
    auto it = anvil.find(t.tensor);
    ASSERT_NE(it, anvil.end()) << t.tensor;
    EXPECT_EQ(t.shape, it->second.shape) << t.tensor;
    EXPECT_EQ(t.data, it->second.data) << t.tensor;  // bitwise
  }
}

INSTANTIATE_TEST_SUITE_P(Versions, HfT5RoundTrip,
                         ::testing::Values(T5Version::kV1_0, T5Version::kV1_1));

HostSlice filled(const std::string& name, std::vector<int64_t> shape, float base) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = base + 0.001f * static_cast<float>(i);
  return HostSlice{name, shape, std::vector<int64_t>(shape.size(), 0), shape, v};
}

// A v1.1 model with one encoder and one decoder block as HF stores it: d 2, inner 2, d_ff 1,
// vocab 3, 2 buckets; tensor k holds k + 0.001 i (the stacks' embed_tokens: copies of shared).
std::vector<HostSlice> hand_built_v11() {
  std::vector<HostSlice> t;
  float k = 1;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    t.push_back(filled(name, shape, k++));
  };
  add("shared.weight", {3, 2});
  for (const char* e : {"encoder.embed_tokens.weight", "decoder.embed_tokens.weight"}) {
    t.push_back(t.front());  // = shared (as HF writes it): skipped
    t.back().tensor = e;
  }
  add("lm_head.weight", {3, 2});
  for (const char* s : {"encoder", "decoder"}) {
    const std::string b = std::string(s) + ".block.0.";
    for (const char* p : {"q", "k", "v", "o"})
      add(b + "layer.0.SelfAttention." + p + ".weight", {2, 2});
    add(b + "layer.0.SelfAttention.relative_attention_bias.weight", {2, 1});
    add(b + "layer.0.layer_norm.weight", {2});
    const std::string ff = b + (s == std::string("decoder") ? "layer.2." : "layer.1.");
    if (s == std::string("decoder")) {
      for (const char* p : {"q", "k", "v", "o"})
        add(b + "layer.1.EncDecAttention." + p + ".weight", {2, 2});
      add(b + "layer.1.layer_norm.weight", {2});
    }
    add(ff + "DenseReluDense.wi_0.weight", {1, 2});
    add(ff + "DenseReluDense.wi_1.weight", {1, 2});
    add(ff + "DenseReluDense.wo.weight", {2, 1});
    add(ff + "layer_norm.weight", {2});
    add(std::string(s) + ".final_layer_norm.weight", {2});
  }
  return t;
}

TEST(HfT5Import, HandBuiltFileFusesAsAnvilExpects) {
  const std::vector<HostSlice> built = hand_built_v11();
  std::map<std::string, const HostSlice*> in;
  for (const HostSlice& t : built) in[t.tensor] = &t;
  // Through a file, as bin/convert import reads an HF directory.
  io::testing::ScratchDir dir;
  std::vector<io::StTensorRef> refs;
  for (const HostSlice& t : built) {
    refs.push_back({t.tensor, io::StDType::kF32, t.shape, t.data.data()});
  }
  ASSERT_TRUE(io::write_safetensors(dir.file("model.safetensors"), refs, {}).ok());
  auto hf = io::read_hf_tensors(dir.path());
  ASSERT_TRUE(hf.ok()) << hf.status();
  ASSERT_EQ(hf->size(), built.size());
  auto got = from_hf_tensors(t5_v11_hf_family(), *hf, {1}, false);
  ASSERT_TRUE(got.ok()) << got.status();
  std::map<std::string, HostSlice> out;
  for (const HostSlice& t : *got) out.emplace(t.tensor, t);
  // Fused tensors: the HF parts' rows stacked, values as built.
  auto stacked = [&](const std::vector<std::string>& parts) {
    std::vector<float> v;
    for (const std::string& p : parts)
      v.insert(v.end(), in.at(p)->data.begin(), in.at(p)->data.end());
    return v;
  };
  const std::string es = "encoder.block.0.layer.0.SelfAttention.";
  EXPECT_EQ(out.at(es + "qkv.weight").shape, (std::vector<int64_t>{6, 2}));
  EXPECT_EQ(out.at(es + "qkv.weight").data,
            stacked({es + "q.weight", es + "k.weight", es + "v.weight"}));
  const std::string x = "decoder.block.0.layer.1.EncDecAttention.";
  EXPECT_EQ(out.at(x + "kv.weight").data, stacked({x + "k.weight", x + "v.weight"}));
  const std::string wi = "decoder.block.0.layer.2.DenseReluDense.";
  EXPECT_EQ(out.at(wi + "wi.weight").shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(out.at(wi + "wi.weight").data, stacked({wi + "wi_0.weight", wi + "wi_1.weight"}));
  EXPECT_EQ(out.at("lm_head.weight").data, in.at("lm_head.weight")->data);
  EXPECT_EQ(out.at("shared.weight").data[0], 1.0f);  // the first tensor built
  EXPECT_EQ(out.count("encoder.embed_tokens.weight"), 0u);
  // shared, lm_head, 2 final norms; encoder qkv, o, rel, ln, wi, wo, ln; decoder the same
  // with cross-attention's q, kv, o, ln.
  EXPECT_EQ(out.size(), 4u + 7u + 11u);

  // HF's stacks' embed_tokens (equal to shared above, and skipped) are refused when they differ.
  std::vector<HostSlice> untied = built;
  for (HostSlice& t : untied) {
    if (t.tensor == "decoder.embed_tokens.weight") t.data[0] += 1.0f;
  }
  const absl::Status s_untied = from_hf_tensors(t5_v11_hf_family(), untied, {1}, false).status();
  EXPECT_THAT(std::string(s_untied.message()),
              HasSubstr("decoder.embed_tokens.weight differs from shared.weight"));

  // A missing part of a fused tensor is named.
  std::vector<HostSlice> partial;
  for (const HostSlice& t : built) {
    if (t.tensor != "decoder.block.0.layer.2.DenseReluDense.wi_1.weight") partial.push_back(t);
  }
  const absl::Status s = from_hf_tensors(t5_v11_hf_family(), partial, {1}, false).status();
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("missing HF tensor decoder.block.0.layer.2.DenseReluDense.wi_1.weight"));
}

HfJsonFields t5_json(bool v11) {
  HfJsonFields j = {{"vocab_size", "32128"},
                    {"d_model", "512"},
                    {"d_kv", "64"},
                    {"d_ff", "2048"},
                    {"num_heads", "8"},
                    {"num_layers", "6"},
                    {"num_decoder_layers", "6"},
                    {"relative_attention_num_buckets", "32"},
                    {"relative_attention_max_distance", "128"},
                    {"dropout_rate", "0.1"},
                    {"layer_norm_epsilon", "1e-06"},
                    {"model_type", "\"t5\""}};
  if (v11) {
    j["feed_forward_proj"] = "\"gated-gelu\"";
    j["tie_word_embeddings"] = "false";
  }
  return j;
}

TEST(HfT5Config, VersionFieldsAndBack) {
  EXPECT_EQ(hf_family("t5", t5_json(false)).value(), &t5_v10_hf_family());  // relu by default
  EXPECT_EQ(hf_family("t5", t5_json(true)).value(), &t5_v11_hf_family());
  for (bool v11 : {false, true}) {
    const HfFamily& f = v11 ? t5_v11_hf_family() : t5_v10_hf_family();
    auto m = hf_import_model(f, t5_json(v11), train_config_schema(), "c.json");
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->tied, !v11);
    for (const char* line : {"type = t5\n", "d_kv = 64\n", "ffn_hidden = 2048\n", "n_layers = 6\n",
                             "decoder_layers = 6\n", "relative_buckets = 32\n",
                             "relative_max_distance = 128\n", "ln_eps = 1e-06\n"}) {
      EXPECT_THAT(m->ini, HasSubstr(line));
    }
    EXPECT_THAT(m->ini, HasSubstr(v11 ? "t5_version = 1.1\n" : "t5_version = 1.0\n"));
    auto cfg = engine::Config::load_string(m->ini, "imported", train_config_schema());
    ASSERT_TRUE(cfg.ok()) << cfg.status();
    ASSERT_EQ(hf_family_of(*cfg, train_config_schema()).value(), &f);
    const HfJsonFields back = hf_config_fields(f, *cfg, train_config_schema());
    for (const char* k : {"vocab_size", "d_model", "d_kv", "d_ff", "num_heads",
                          "num_decoder_layers", "relative_attention_max_distance"}) {
      EXPECT_EQ(back.at(k), t5_json(v11).at(k)) << k;
    }
    EXPECT_EQ(back.at("feed_forward_proj"), v11 ? "\"gated-gelu\"" : "\"relu\"");
  }
  // anvil's defaults written out: d_kv 0 = d_model / n_heads, decoder_layers 0 = null.
  auto cfg = engine::Config::load_string("[model]\ntype = t5\nd_model = 64\nn_heads = 4\n", "c",
                                         train_config_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  const HfJsonFields back = hf_config_fields(t5_v10_hf_family(), *cfg, train_config_schema());
  EXPECT_EQ(back.at("d_kv"), "16");
  EXPECT_EQ(back.at("num_decoder_layers"), "null");
}

}  // namespace
}  // namespace anvil::model
