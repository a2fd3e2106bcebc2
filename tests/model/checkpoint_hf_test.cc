// The Hugging Face family tables (model/checkpoint_hf.h, model/hf_config.h):
//   tensors: for GPT-2, BLOOM and LLaMA, random tensors in HF's layout import to anvil's names
//   with the layout anvil expects (checked element by element against the HF tensors: Conv1D
//   transposed, BLOOM's per-head q/k/v rows regrouped, LLaMA's q/k/v and gate/up stacked) and
//   export back bitwise; buffers and tied heads are skipped; missing, unknown and misshapen
//   tensors are errors naming them.
//   config.json: fields to [model] and back, family detection from [model], fixed fields, GQA.
#include "model/checkpoint_hf.h"

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/hf_config.h"
#include "model/train/train_config.h"
#include "tests/model/hf_test_tensors.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::HostSlice;
using ::testing::HasSubstr;
using ::testing::Not;

using testing_hf::by_name;
using testing_hf::random_tensor;

// Export of the import gives back every HF tensor that is not skipped, bitwise, same shapes.
void expect_round_trip(const HfFamily& f, const std::vector<HostSlice>& hf,
                       const std::vector<std::string>& skipped, HfDims dims, bool tied) {
  absl::StatusOr<std::vector<HostSlice>> anvil = from_hf_tensors(f, hf, dims, tied);
  ASSERT_TRUE(anvil.ok()) << anvil.status();
  absl::StatusOr<std::vector<HostSlice>> back = to_hf_tensors(f, *anvil, dims);
  ASSERT_TRUE(back.ok()) << back.status();
  const std::map<std::string, HostSlice> got = by_name(*back);
  size_t expected = 0;
  for (const HostSlice& t : hf) {
    if (std::find(skipped.begin(), skipped.end(), t.tensor) != skipped.end()) continue;
    ++expected;
    auto it = got.find(t.tensor);
    ASSERT_NE(it, got.end()) << t.tensor;
    EXPECT_EQ(it->second.shape, t.shape) << t.tensor;
    EXPECT_EQ(it->second.data, t.data) << t.tensor;  // bitwise: float ==, no NaN in the inputs
  }
  EXPECT_EQ(got.size(), expected);
}

// GPT-2: d 4, 1 layer, ffn 8, vocab 5, 3 positions.
std::vector<HostSlice> gpt2_tensors() {
  const std::string p = "transformer.";
  uint64_t s = 1;
  std::vector<HostSlice> t = {
      random_tensor(p + "wte.weight", {5, 4}, s++),
      random_tensor(p + "wpe.weight", {3, 4}, s++),
      random_tensor(p + "ln_f.weight", {4}, s++),
      random_tensor(p + "ln_f.bias", {4}, s++),
      random_tensor("lm_head.weight", {5, 4}, s++),               // tied: skipped
      random_tensor(p + "h.0.attn.bias", {1, 1, 3, 3}, s++),      // causal-mask buffer
      random_tensor(p + "h.0.attn.c_attn.weight", {4, 12}, s++),  // Conv1D [in, out]
      random_tensor(p + "h.0.attn.c_attn.bias", {12}, s++),
      random_tensor(p + "h.0.attn.c_proj.weight", {4, 4}, s++),
      random_tensor(p + "h.0.attn.c_proj.bias", {4}, s++),
      random_tensor(p + "h.0.mlp.c_fc.weight", {4, 8}, s++),
      random_tensor(p + "h.0.mlp.c_fc.bias", {8}, s++),
      random_tensor(p + "h.0.mlp.c_proj.weight", {8, 4}, s++),
      random_tensor(p + "h.0.mlp.c_proj.bias", {4}, s++)};
  for (const char* ln : {"ln_1", "ln_2"}) {
    t.push_back(random_tensor(p + "h.0." + ln + ".weight", {4}, s++));
    t.push_back(random_tensor(p + "h.0." + ln + ".bias", {4}, s++));
  }
  return t;
}

TEST(CheckpointHfTest, Gpt2) {
  const HfFamily& f = gpt2_hf_family();
  const std::vector<HostSlice> hf = gpt2_tensors();
  absl::StatusOr<std::vector<HostSlice>> anvil = from_hf_tensors(f, hf, {4}, true);
  ASSERT_TRUE(anvil.ok()) << anvil.status();
  const std::map<std::string, HostSlice> a = by_name(*anvil), h = by_name(hf);
  EXPECT_EQ(a.size(), hf.size() - 2);
  EXPECT_EQ(a.count("lm_head.weight"), 0u);
  // Conv1D weights are transposed to [out, in]; everything else is renamed only.
  const HostSlice& w = a.at("h.0.attn.c_attn.weight");
  const HostSlice& hw = h.at("transformer.h.0.attn.c_attn.weight");
  ASSERT_EQ(w.shape, (std::vector<int64_t>{12, 4}));
  for (int64_t o = 0; o < 12; ++o) {
    for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(w.data[o * 4 + i], hw.data[i * 12 + o]);
  }
  EXPECT_EQ(a.at("wte.weight").data, h.at("transformer.wte.weight").data);
  expect_round_trip(f, hf, {"lm_head.weight", "transformer.h.0.attn.bias"}, {4}, true);

  // Hub layout: names without "transformer." import the same.
  std::vector<HostSlice> bare = hf;
  for (HostSlice& t : bare) {
    if (t.tensor.rfind("transformer.", 0) == 0) t.tensor = t.tensor.substr(12);
  }
  absl::StatusOr<std::vector<HostSlice>> anvil2 = from_hf_tensors(f, bare, {4}, true);
  ASSERT_TRUE(anvil2.ok()) << anvil2.status();
  EXPECT_EQ(by_name(*anvil2).at("h.0.attn.c_attn.weight").data, w.data);
  EXPECT_EQ(hf_family("gpt2").value(), &f);
  EXPECT_THAT(std::string(hf_family("mamba").status().message()),
              HasSubstr("supported: gpt2, bloom, llama, mistral, qwen2, bert, t5"));
}

// BLOOM: d 6, 2 heads of 3, 2 layers, vocab 7.
std::vector<HostSlice> bloom_tensors(const std::string& p) {
  uint64_t s = 100;
  std::vector<HostSlice> t = {random_tensor(p + "word_embeddings.weight", {7, 6}, s++),
                              random_tensor(p + "word_embeddings_layernorm.weight", {6}, s++),
                              random_tensor(p + "word_embeddings_layernorm.bias", {6}, s++),
                              random_tensor(p + "ln_f.weight", {6}, s++),
                              random_tensor(p + "ln_f.bias", {6}, s++),
                              random_tensor("lm_head.weight", {7, 6}, s++)};
  for (int l = 0; l < 2; ++l) {
    const std::string h = p + "h." + std::to_string(l) + ".";
    for (const char* ln : {"input_layernorm", "post_attention_layernorm"}) {
      t.push_back(random_tensor(h + ln + ".weight", {6}, s++));
      t.push_back(random_tensor(h + ln + ".bias", {6}, s++));
    }
    t.push_back(random_tensor(h + "self_attention.query_key_value.weight", {18, 6}, s++));
    t.push_back(random_tensor(h + "self_attention.query_key_value.bias", {18}, s++));
    t.push_back(random_tensor(h + "self_attention.dense.weight", {6, 6}, s++));
    t.push_back(random_tensor(h + "self_attention.dense.bias", {6}, s++));
    t.push_back(random_tensor(h + "mlp.dense_h_to_4h.weight", {24, 6}, s++));
    t.push_back(random_tensor(h + "mlp.dense_h_to_4h.bias", {24}, s++));
    t.push_back(random_tensor(h + "mlp.dense_4h_to_h.weight", {6, 24}, s++));
    t.push_back(random_tensor(h + "mlp.dense_4h_to_h.bias", {6}, s++));
  }
  return t;
}

TEST(CheckpointHfTest, BloomRegroupsFusedQkvPerHead) {
  const HfFamily& f = bloom_hf_family();
  const int64_t heads = 2, dh = 3, d = 6;
  for (const std::string p : {"transformer.", ""}) {  // save_pretrained's names and the hub's
    SCOPED_TRACE(p.empty() ? "no prefix" : "prefix");
    const std::vector<HostSlice> hf = bloom_tensors(p);
    absl::StatusOr<std::vector<HostSlice>> anvil = from_hf_tensors(f, hf, {heads}, true);
    ASSERT_TRUE(anvil.ok()) << anvil.status();
    const std::map<std::string, HostSlice> a = by_name(*anvil), h = by_name(hf);
    EXPECT_EQ(a.size(), hf.size() - 1);  // lm_head is the embedding
    EXPECT_EQ(a.at("wte_ln.bias").data, h.at(p + "word_embeddings_layernorm.bias").data);
    EXPECT_EQ(a.at("h.1.mlp.c_fc.weight").data, h.at(p + "h.1.mlp.dense_h_to_4h.weight").data);
    // anvil row (part, head, j) is BLOOM's row (head, part, j), part in q, k, v.
    const HostSlice& w = a.at("h.1.attn.c_attn.weight");
    const HostSlice& b = a.at("h.1.attn.c_attn.bias");
    const HostSlice& hw = h.at(p + "h.1.self_attention.query_key_value.weight");
    const HostSlice& hb = h.at(p + "h.1.self_attention.query_key_value.bias");
    for (int64_t part = 0; part < 3; ++part) {
      for (int64_t hd = 0; hd < heads; ++hd) {
        for (int64_t j = 0; j < dh; ++j) {
          const int64_t ar = (part * heads + hd) * dh + j, br = (hd * 3 + part) * dh + j;
          EXPECT_EQ(b.data[ar], hb.data[br]);
          for (int64_t c = 0; c < d; ++c) EXPECT_EQ(w.data[ar * d + c], hw.data[br * d + c]);
        }
      }
    }
  }
  expect_round_trip(f, bloom_tensors("transformer."), {"lm_head.weight"}, {heads}, true);
  // 18 rows are not 3 x 4 heads.
  EXPECT_THAT(std::string(from_hf_tensors(f, bloom_tensors(""), {4}, true).status().message()),
              HasSubstr("does not split into 3 x 4 heads"));
}

// LLaMA: d 6, 2 heads, 1 layer, ffn 5, vocab 7.
std::vector<HostSlice> llama_tensors(bool with_head) {
  uint64_t s = 200;
  const std::string l = "model.layers.0.";
  std::vector<HostSlice> t = {random_tensor("model.embed_tokens.weight", {7, 6}, s++),
                              random_tensor("model.norm.weight", {6}, s++),
                              random_tensor(l + "input_layernorm.weight", {6}, s++),
                              random_tensor(l + "post_attention_layernorm.weight", {6}, s++),
                              random_tensor(l + "self_attn.rotary_emb.inv_freq", {1}, s++)};
  for (const char* m : {"q_proj", "k_proj", "v_proj", "o_proj"}) {
    t.push_back(random_tensor(l + "self_attn." + m + ".weight", {6, 6}, s++));
  }
  t.push_back(random_tensor(l + "mlp.gate_proj.weight", {5, 6}, s++));
  t.push_back(random_tensor(l + "mlp.up_proj.weight", {5, 6}, s++));
  t.push_back(random_tensor(l + "mlp.down_proj.weight", {6, 5}, s++));
  if (with_head) t.push_back(random_tensor("lm_head.weight", {7, 6}, s++));
  return t;
}

TEST(CheckpointHfTest, LlamaStacksProjections) {
  const HfFamily& f = llama_hf_family();
  const std::vector<HostSlice> hf = llama_tensors(true);
  absl::StatusOr<std::vector<HostSlice>> anvil = from_hf_tensors(f, hf, {2}, false);
  ASSERT_TRUE(anvil.ok()) << anvil.status();
  const std::map<std::string, HostSlice> a = by_name(*anvil), h = by_name(hf);
  const std::string l = "model.layers.0.";
  // c_attn = [q; k; v], c_fc = [gate; up] by rows.
  const HostSlice& qkv = a.at("h.0.attn.c_attn.weight");
  ASSERT_EQ(qkv.shape, (std::vector<int64_t>{18, 6}));
  for (int part = 0; part < 3; ++part) {
    const char* m = part == 0 ? "q_proj" : part == 1 ? "k_proj" : "v_proj";
    const std::vector<float>& src = h.at(l + "self_attn." + m + ".weight").data;
    EXPECT_TRUE(std::equal(src.begin(), src.end(), qkv.data.begin() + part * 36)) << m;
  }
  const HostSlice& fc = a.at("h.0.mlp.c_fc.weight");
  ASSERT_EQ(fc.shape, (std::vector<int64_t>{10, 6}));
  const std::vector<float>& gate = h.at(l + "mlp.gate_proj.weight").data;
  const std::vector<float>& up = h.at(l + "mlp.up_proj.weight").data;
  EXPECT_TRUE(std::equal(gate.begin(), gate.end(), fc.data.begin()));
  EXPECT_TRUE(std::equal(up.begin(), up.end(), fc.data.begin() + 30));
  EXPECT_EQ(a.at("lm_head.weight").data, h.at("lm_head.weight").data);  // untied
  EXPECT_EQ(a.at("ln_f.weight").data, h.at("model.norm.weight").data);
  expect_round_trip(f, hf, {l + "self_attn.rotary_emb.inv_freq"}, {2}, false);
  // Tied: a saved lm_head is skipped; none saved is fine too.
  EXPECT_EQ(by_name(from_hf_tensors(f, hf, {2}, true).value()).count("lm_head.weight"), 0u);
  EXPECT_TRUE(from_hf_tensors(f, llama_tensors(false), {2}, true).ok());
}

// Grouped-query LLaMA / Qwen2: d 8, 4 heads of 2, 2 kv heads (G = 2), 1 layer, ffn 5, vocab 7;
// Qwen2 also has q/k/v_proj biases.
std::vector<HostSlice> gqa_tensors(bool qkv_bias) {
  uint64_t s = 300;
  const std::string l = "model.layers.0.";
  std::vector<HostSlice> t = {random_tensor("model.embed_tokens.weight", {7, 8}, s++),
                              random_tensor("model.norm.weight", {8}, s++),
                              random_tensor(l + "input_layernorm.weight", {8}, s++),
                              random_tensor(l + "post_attention_layernorm.weight", {8}, s++),
                              random_tensor(l + "self_attn.q_proj.weight", {8, 8}, s++),
                              random_tensor(l + "self_attn.k_proj.weight", {4, 8}, s++),
                              random_tensor(l + "self_attn.v_proj.weight", {4, 8}, s++),
                              random_tensor(l + "self_attn.o_proj.weight", {8, 8}, s++),
                              random_tensor(l + "mlp.gate_proj.weight", {5, 8}, s++),
                              random_tensor(l + "mlp.up_proj.weight", {5, 8}, s++),
                              random_tensor(l + "mlp.down_proj.weight", {8, 5}, s++),
                              random_tensor("lm_head.weight", {7, 8}, s++)};
  if (qkv_bias) {
    t.push_back(random_tensor(l + "self_attn.q_proj.bias", {8}, s++));
    t.push_back(random_tensor(l + "self_attn.k_proj.bias", {4}, s++));
    t.push_back(random_tensor(l + "self_attn.v_proj.bias", {4}, s++));
  }
  return t;
}

// c_attn's rows in Megatron-core's grouped order, per kv head g: q heads 2g, 2g+1, k_g, v_g
// (each head_dim 2 rows of q/k/v_proj), written out by hand.
TEST(CheckpointHfTest, GroupedQueryProjectionsInMegatronOrder) {
  const HfDims dims{4, 2};
  for (const HfFamily* f : {&llama_hf_family(), &mistral_hf_family(), &qwen2_hf_family()}) {
    const bool bias = f == &qwen2_hf_family();
    const std::vector<HostSlice> hf = gqa_tensors(bias);
    absl::StatusOr<std::vector<HostSlice>> anvil = from_hf_tensors(*f, hf, dims, false);
    ASSERT_TRUE(anvil.ok()) << f->model_type << ": " << anvil.status();
    const std::map<std::string, HostSlice> a = by_name(*anvil), h = by_name(hf);
    const std::string l = "model.layers.0.self_attn.";
    for (const char* kind : {"weight", "bias"}) {
      auto it = a.find(std::string("h.0.attn.c_attn.") + kind);
      if (std::string(kind) == "bias" && !bias) {
        EXPECT_EQ(it, a.end());
        continue;
      }
      ASSERT_NE(it, a.end()) << kind;
      const int64_t cols = std::string(kind) == "weight" ? 8 : 1;
      ASSERT_EQ(it->second.shape[0], 16);  // (4 + 2 * 2) heads x head_dim 2
      // anvil head block b of group g -> (HF tensor, head in it).
      const std::vector<std::pair<const char*, int64_t>> order = {
          {"q_proj", 0}, {"q_proj", 1}, {"k_proj", 0}, {"v_proj", 0},
          {"q_proj", 2}, {"q_proj", 3}, {"k_proj", 1}, {"v_proj", 1}};
      for (size_t b = 0; b < order.size(); ++b) {
        const std::vector<float>& src = h.at(l + order[b].first + "." + kind).data;
        const int64_t n = 2 * cols;  // one head's elements
        EXPECT_TRUE(std::equal(src.begin() + order[b].second * n,
                               src.begin() + (order[b].second + 1) * n,
                               it->second.data.begin() + static_cast<int64_t>(b) * n))
            << f->model_type << " " << kind << " block " << b;
      }
    }
    expect_round_trip(*f, hf, {}, dims, false);
  }
  // k_proj with the rows of 4 kv heads while config.json says 2.
  std::vector<HostSlice> bad = gqa_tensors(false);
  for (HostSlice& t : bad) {
    if (t.tensor.find("k_proj") != t.tensor.npos) t = random_tensor(t.tensor, {8, 8}, 9);
  }
  EXPECT_THAT(std::string(from_hf_tensors(llama_hf_family(), bad, dims, false).status().message()),
              HasSubstr("expected 4 query heads and 2 key/value heads"));
  // Multi-query (1 kv head): q heads 0..3, k, v.
  const HfDims mqa{4, 1};
  std::vector<HostSlice> one = gqa_tensors(false);
  for (HostSlice& t : one) {
    if (t.tensor.find("k_proj") != t.tensor.npos || t.tensor.find("v_proj") != t.tensor.npos) {
      t = random_tensor(t.tensor, {2, 8}, t.tensor.find("k_") != t.tensor.npos ? 10 : 11);
    }
  }
  expect_round_trip(llama_hf_family(), one, {}, mqa, false);
}

TEST(CheckpointHfTest, ErrorsNameTheTensor) {
  const HfFamily& f = llama_hf_family();
  auto message = [&](std::vector<HostSlice> hf) {
    return std::string(from_hf_tensors(f, std::move(hf), {2}, false).status().message());
  };
  std::vector<HostSlice> hf = llama_tensors(true);
  hf.erase(std::find_if(hf.begin(), hf.end(), [](const HostSlice& t) {
    return t.tensor.find("k_proj") != t.tensor.npos;
  }));
  EXPECT_THAT(message(hf), HasSubstr("missing HF tensor model.layers.0.self_attn.k_proj.weight"));
  hf = llama_tensors(true);
  hf.push_back(random_tensor("model.layers.0.self_attn.q_proj.bias", {6}, 1));
  EXPECT_THAT(message(hf), HasSubstr("HF tensor model.layers.0.self_attn.q_proj.bias [6] is not "
                                     "part of anvil's llama model"));
  hf = llama_tensors(true);
  for (HostSlice& t : hf) {
    if (t.tensor.find("up_proj") != t.tensor.npos) t = random_tensor(t.tensor, {5, 4}, 2);
  }
  EXPECT_THAT(message(hf), HasSubstr("model.layers.0.mlp.up_proj.weight: shape [5, 4] does not "
                                     "stack with model.layers.0.mlp.gate_proj.weight's [5, 6]"));
  EXPECT_THAT(
      std::string(
          to_hf_tensors(f, {random_tensor("wpe.weight", {3, 6}, 3)}, {2}).status().message()),
      HasSubstr("tensor wpe.weight has no Hugging Face llama name"));
}

// ------------------------------------------------------------------------------------------
// config.json <-> [model]

// train_config_schema() with the GPT-variant [model] keys (declared here when this build's
// schema lacks them, so the mapping is tested either way).
const engine::ConfigSchema& variant_schema() {
  static const engine::ConfigSchema s = [] {
    engine::ConfigSchema c = train_config_schema();
    using engine::ConfigType;
    const std::vector<std::pair<std::string, ConfigType>> keys = {
        {"position_embedding", ConfigType::kString},
        {"rotary_base", ConfigType::kFloat},
        {"rotary_percent", ConfigType::kFloat},
        {"embed_layernorm", ConfigType::kBool},
        {"activation", ConfigType::kString},
        {"norm", ConfigType::kString},
        {"bias", ConfigType::kBool},
        {"tie_embeddings", ConfigType::kBool}};
    const std::map<std::string, std::string> defaults = {{"position_embedding", "learned"},
                                                         {"rotary_base", "10000"},
                                                         {"rotary_percent", "1.0"},
                                                         {"embed_layernorm", "false"},
                                                         {"activation", "gelu"},
                                                         {"norm", "layernorm"},
                                                         {"bias", "true"},
                                                         {"tie_embeddings", "true"}};
    for (const auto& [k, t] : keys) {
      if (c.find("model", k) == nullptr) c.add("model", k, t, defaults.at(k), "test");
    }
    return c;
  }();
  return s;
}

HfJsonFields llama_json() {
  return {{"model_type", "\"llama\""},      {"vocab_size", "1000"},
          {"hidden_size", "256"},           {"intermediate_size", "688"},
          {"num_hidden_layers", "2"},       {"num_attention_heads", "4"},
          {"num_key_value_heads", "4"},     {"max_position_embeddings", "128"},
          {"rms_norm_eps", "1e-05"},        {"rope_theta", "500000.0"},
          {"tie_word_embeddings", "false"}, {"hidden_act", "\"silu\""},
          {"rope_scaling", "null"},         {"attention_bias", "false"}};
}

TEST(CheckpointHfConfigTest, LlamaImportAndExport) {
  const HfFamily& f = llama_hf_family();
  absl::StatusOr<HfImportedModel> m = hf_import_model(f, llama_json(), variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->dims.n_heads, 4);
  EXPECT_FALSE(m->tied);
  for (const char* line :
       {"vocab_size = 1000\n", "d_model = 256\n", "ffn_hidden = 688\n", "n_layers = 2\n",
        "n_heads = 4\n", "max_seq_len = 128\n", "ln_eps = 1e-05\n", "rotary_base = 500000.0\n",
        "tie_embeddings = false\n", "position_embedding = rotary\n", "activation = swiglu\n",
        "norm = rmsnorm\n", "bias = false\n", "embed_layernorm = false\n"}) {
    EXPECT_THAT(m->ini, HasSubstr(line));
  }
  // The [model] it wrote is a llama again, with the same config.json numbers.
  absl::StatusOr<engine::Config> cfg =
      engine::Config::load_string(m->ini, "imported", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(hf_family_of(*cfg, variant_schema()).value(), &f);
  EXPECT_EQ(m->dims.n_kv_heads, 4);
  // Grouped-query attention: num_key_value_heads is n_kv_heads, both ways.
  HfJsonFields gj = llama_json();
  gj["num_key_value_heads"] = "1";
  absl::StatusOr<HfImportedModel> g = hf_import_model(f, gj, variant_schema(), "c.json");
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_THAT(g->ini, HasSubstr("n_kv_heads = 1\n"));
  EXPECT_EQ(g->dims.n_kv_heads, 1);
  absl::StatusOr<engine::Config> gqa = engine::Config::load_string(g->ini, "gqa", variant_schema());
  ASSERT_TRUE(gqa.ok()) << gqa.status();
  EXPECT_EQ(hf_family_of(*gqa, variant_schema()).value(), &f);
  EXPECT_EQ(hf_config_fields(f, *gqa, variant_schema()).at("num_key_value_heads"), "1");
  // n_kv_heads 0 (= n_heads) is written out.
  absl::StatusOr<engine::Config> mha = engine::Config::load_string(
      "[model]\nn_heads = 4\nposition_embedding = rotary\nactivation = swiglu\nnorm = "
      "rmsnorm\nbias = false\n",
      "mha", variant_schema());
  ASSERT_TRUE(mha.ok()) << mha.status();
  EXPECT_EQ(hf_family_of(*mha, variant_schema()).value(), &f);
  EXPECT_EQ(hf_config_fields(f, *mha, variant_schema()).at("num_key_value_heads"), "4");
  EXPECT_EQ(hf_config_fields(f, *mha, variant_schema()).at("rope_scaling"), "null");
  // A grouped GPT-2-like model has no family.
  absl::StatusOr<engine::Config> gpt =
      engine::Config::load_string("[model]\nn_heads = 4\nn_kv_heads = 2\n", "g", variant_schema());
  ASSERT_TRUE(gpt.ok()) << gpt.status();
  EXPECT_THAT(std::string(hf_family_of(*gpt, variant_schema()).status().message()),
              HasSubstr("gpt2 has no grouped-query attention (n_kv_heads = 2 < n_heads = 4)"));
  const HfJsonFields back = hf_config_fields(f, *cfg, variant_schema());
  for (const char* k : {"vocab_size", "hidden_size", "intermediate_size", "num_key_value_heads",
                        "rms_norm_eps", "rope_theta", "tie_word_embeddings", "hidden_act"}) {
    EXPECT_EQ(back.at(k), k == std::string("rope_theta") ? "500000" : llama_json().at(k)) << k;
  }

  // LlamaConfig defaults for absent fields (tie false, eps 1e-6), not anvil's.
  HfJsonFields bare = llama_json();
  bare.erase("tie_word_embeddings");
  bare.erase("rms_norm_eps");
  m = hf_import_model(f, bare, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->tied);
  EXPECT_THAT(m->ini, HasSubstr("ln_eps = 1e-06\n"));
}

TEST(CheckpointHfConfigTest, ImportErrors) {
  const HfFamily& f = llama_hf_family();
  auto message = [&](HfJsonFields j) {
    return std::string(hf_import_model(f, j, variant_schema(), "c.json").status().message());
  };
  HfJsonFields j = llama_json();
  j["num_key_value_heads"] = "3";
  EXPECT_THAT(message(j), HasSubstr("c.json: num_key_value_heads 3 must be positive and divide "
                                    "num_attention_heads 4"));
  j = llama_json();
  j["rope_scaling"] = "{\"type\":\"dynamic\",\"factor\":2.0}";
  j["rope_scaling.type"] = "\"dynamic\"";
  j["rope_scaling.factor"] = "2.0";
  EXPECT_THAT(message(j), HasSubstr("c.json: rope_scaling type \"dynamic\" is not supported"));
  j["rope_scaling.type"] = "\"linear\"";
  j["rope_scaling.beta"] = "1";
  EXPECT_THAT(message(j), HasSubstr("c.json: rope_scaling.beta = 1 is not part of rope_scaling "
                                    "type \"linear\""));
  j.erase("rope_scaling.beta");
  j.erase("rope_scaling.factor");
  EXPECT_THAT(message(j), HasSubstr("rope_scaling type \"linear\" needs rope_scaling.factor"));
  j = llama_json();
  j["head_dim"] = "128";  // 256 / 4 = 64
  EXPECT_THAT(message(j), HasSubstr("c.json: head_dim = 128 but hidden_size / "
                                    "num_attention_heads = 256 / 4"));
  j["head_dim"] = "64";  // Llama 3.2 writes it out
  EXPECT_TRUE(hf_import_model(f, j, variant_schema(), "c.json").ok());
  j = llama_json();
  j["attention_bias"] = "true";
  EXPECT_THAT(message(j), HasSubstr("c.json: attention_bias is true; anvil's llama implements "
                                    "false"));
  j = llama_json();
  j["hidden_size"] = "\"big\"";
  EXPECT_THAT(message(j), HasSubstr("c.json: hidden_size: expected an integer, got \"big\""));
  // A build whose schema lacks the variant keys refuses a LLaMA, naming the key.
  if (train_config_schema().find("model", "position_embedding") == nullptr) {
    EXPECT_THAT(
        std::string(
            hf_import_model(f, llama_json(), train_config_schema(), "c.json").status().message()),
        HasSubstr("c.json: a LlamaForCausalLM needs [model] "));
  }
}

// rope_scaling's members (as bin/convert gives them) to [model] rope_scaling* and back.
TEST(CheckpointHfConfigTest, RopeScaling) {
  const HfFamily& f = llama_hf_family();
  HfJsonFields j = llama_json();
  j["rope_scaling"] = "{...}";  // the object's text; its members are what import reads
  j["rope_scaling.rope_type"] = "\"llama3\"";
  j["rope_scaling.factor"] = "8.0";
  j["rope_scaling.low_freq_factor"] = "1.0";
  j["rope_scaling.high_freq_factor"] = "4.0";
  j["rope_scaling.original_max_position_embeddings"] = "8192";
  absl::StatusOr<HfImportedModel> m = hf_import_model(f, j, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  for (const char* line :
       {"rope_scaling = llama3\n", "rope_scaling_factor = 8.0\n", "rope_low_freq_factor = 1.0\n",
        "rope_high_freq_factor = 4.0\n", "rope_original_max_position = 8192\n"}) {
    EXPECT_THAT(m->ini, HasSubstr(line));
  }
  absl::StatusOr<engine::Config> cfg =
      engine::Config::load_string(m->ini, "imported", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(hf_config_fields(f, *cfg, variant_schema()).at("rope_scaling"),
            "{\"factor\": 8, \"high_freq_factor\": 4, \"low_freq_factor\": 1, "
            "\"original_max_position_embeddings\": 8192, \"rope_type\": \"llama3\"}");
  // Older transformers: "type"; linear has a factor only.
  j = llama_json();
  j["rope_scaling"] = "{...}";
  j["rope_scaling.type"] = "\"linear\"";
  j["rope_scaling.factor"] = "2.5";
  m = hf_import_model(f, j, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->ini, HasSubstr("rope_scaling = linear\nrope_scaling_factor = 2.5\n"));
  cfg = engine::Config::load_string(m->ini, "imported", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(hf_config_fields(f, *cfg, variant_schema()).at("rope_scaling"),
            "{\"factor\": 2.5, \"rope_type\": \"linear\"}");
}

// transformers 5's rope_parameters (rope_theta and the scaling in one object) imports as the
// older rope_theta + rope_scaling do; conflicting or unknown forms are refused by name.
TEST(CheckpointHfConfigTest, RopeParametersOfTransformers5) {
  const HfFamily& f = llama_hf_family();
  HfJsonFields old = llama_json();
  old["rope_scaling"] = "{...}";
  old["rope_scaling.rope_type"] = "\"llama3\"";
  old["rope_scaling.factor"] = "8.0";
  old["rope_scaling.low_freq_factor"] = "1.0";
  old["rope_scaling.high_freq_factor"] = "4.0";
  old["rope_scaling.original_max_position_embeddings"] = "8192";
  HfJsonFields j = llama_json();
  for (const char* k : {"rope_theta", "rope_scaling"}) j.erase(k);
  j["rope_parameters"] = "{...}";
  j["rope_parameters.rope_type"] = "\"llama3\"";
  j["rope_parameters.rope_theta"] = "500000.0";
  j["rope_parameters.factor"] = "8.0";
  j["rope_parameters.low_freq_factor"] = "1.0";
  j["rope_parameters.high_freq_factor"] = "4.0";
  j["rope_parameters.original_max_position_embeddings"] = "8192";
  absl::StatusOr<HfImportedModel> a = hf_import_model(f, old, variant_schema(), "c.json");
  absl::StatusOr<HfImportedModel> b = hf_import_model(f, j, variant_schema(), "c.json");
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->ini, a->ini);
  EXPECT_THAT(b->ini, HasSubstr("rotary_base = 500000.0\n"));
  EXPECT_THAT(b->ini, HasSubstr("rope_scaling = llama3\n"));
  // rope_type default: the base only (Qwen2 style).
  HfJsonFields d = llama_json();
  for (const char* k : {"rope_theta", "rope_scaling"}) d.erase(k);
  d["rope_parameters"] = "{...}";
  d["rope_parameters.rope_type"] = "\"default\"";
  d["rope_parameters.rope_theta"] = "1000000.0";
  b = hf_import_model(f, d, variant_schema(), "c.json");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_THAT(b->ini, HasSubstr("rotary_base = 1000000.0\n"));
  EXPECT_THAT(b->ini, Not(HasSubstr("rope_scaling = llama3")));
  // Both forms, disagreeing.
  d["rope_theta"] = "10000.0";
  b = hf_import_model(f, d, variant_schema(), "c.json");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("rope_theta = 10000.0 but rope_parameters.rope_theta = 1000000.0"));
  j["rope_scaling"] = "{...}";
  j["rope_scaling.rope_type"] = "\"linear\"";
  b = hf_import_model(f, j, variant_schema(), "c.json");
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(std::string(b.status().message()),
              HasSubstr("both rope_scaling and rope_parameters"));
}

// Mistral's sliding_window and Qwen2's q/k/v bias pick their family on export.
TEST(CheckpointHfConfigTest, MistralAndQwen2) {
  HfJsonFields j = llama_json();
  for (const char* k : {"rope_scaling", "attention_bias"}) j.erase(k);
  j["model_type"] = "\"mistral\"";
  j["sliding_window"] = "4096";
  absl::StatusOr<HfImportedModel> m =
      hf_import_model(mistral_hf_family(), j, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->ini, HasSubstr("sliding_window = 4096\n"));
  absl::StatusOr<engine::Config> cfg = engine::Config::load_string(m->ini, "m", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(hf_family_of(*cfg, variant_schema()).value(), &mistral_hf_family());
  EXPECT_EQ(hf_config_fields(mistral_hf_family(), *cfg, variant_schema()).at("sliding_window"),
            "4096");
  // No window (Mistral v0.2+): null both ways, and such a model exports as a LLaMA.
  j["sliding_window"] = "null";
  m = hf_import_model(mistral_hf_family(), j, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->ini, HasSubstr("sliding_window = 0\n"));
  cfg = engine::Config::load_string(m->ini, "m", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(hf_config_fields(mistral_hf_family(), *cfg, variant_schema()).at("sliding_window"),
            "null");
  EXPECT_EQ(hf_family_of(*cfg, variant_schema()).value(), &llama_hf_family());

  j = llama_json();
  j["model_type"] = "\"qwen2\"";
  j["use_sliding_window"] = "false";
  j["sliding_window"] = "131072";  // unused by HF without use_sliding_window
  j.erase("attention_bias");
  m = hf_import_model(qwen2_hf_family(), j, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(m->ini, HasSubstr("qkv_bias = true\n"));
  EXPECT_THAT(m->ini, HasSubstr("bias = false\n"));
  cfg = engine::Config::load_string(m->ini, "q", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(hf_family_of(*cfg, variant_schema()).value(), &qwen2_hf_family());
  EXPECT_EQ(hf_config_fields(qwen2_hf_family(), *cfg, variant_schema()).at("use_sliding_window"),
            "false");
  j["use_sliding_window"] = "true";
  EXPECT_THAT(
      std::string(
          hf_import_model(qwen2_hf_family(), j, variant_schema(), "c.json").status().message()),
      HasSubstr("c.json: use_sliding_window is true; anvil's qwen2 implements false"));
}

TEST(CheckpointHfConfigTest, BloomAndGpt2) {
  const HfJsonFields bloom = {{"vocab_size", "1000"},
                              {"n_embed", "128"},
                              {"hidden_size", "128"},
                              {"n_layer", "2"},
                              {"n_head", "4"},
                              {"layer_norm_epsilon", "1e-05"},
                              {"slow_but_exact", "false"},
                              {"hidden_dropout", "0.0"}};
  absl::StatusOr<HfImportedModel> m =
      hf_import_model(bloom_hf_family(), bloom, variant_schema(), "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->tied);
  for (const char* line :
       {"d_model = 128\n", "position_embedding = alibi\n", "embed_layernorm = true\n",
        "max_seq_len = 2048\n", "ffn_hidden = 0\n"}) {
    EXPECT_THAT(m->ini, HasSubstr(line));
  }
  HfJsonFields bad = bloom;
  bad["n_embed"] = "64";
  EXPECT_THAT(
      std::string(
          hf_import_model(bloom_hf_family(), bad, variant_schema(), "c.json").status().message()),
      HasSubstr("c.json: n_embed = 64 but hidden_size = 128: anvil has one [model] d_model"));
  absl::StatusOr<engine::Config> cfg =
      engine::Config::load_string(m->ini, "imported", variant_schema());
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  EXPECT_EQ(hf_family_of(*cfg, variant_schema()).value(), &bloom_hf_family());

  // Plain GPT-2 [model] (the variant keys at their defaults, or absent from the schema).
  for (const engine::ConfigSchema* s : {&variant_schema(), &train_config_schema()}) {
    absl::StatusOr<engine::Config> g =
        engine::Config::load_string("[model]\nn_heads = 4\nd_model = 128\n", "g", *s);
    ASSERT_TRUE(g.ok()) << g.status();
    EXPECT_EQ(hf_family_of(*g, *s).value(), &gpt2_hf_family());
    const HfJsonFields j = hf_config_fields(gpt2_hf_family(), *g, *s);
    EXPECT_EQ(j.at("n_inner"), "null");
    EXPECT_EQ(j.at("n_embd"), "128");
    EXPECT_EQ(j.at("activation_function"), "\"gelu_new\"");
  }
  // A [model] no family matches.
  absl::StatusOr<engine::Config> odd =
      engine::Config::load_string("[model]\nposition_embedding = alibi\n", "odd", variant_schema());
  ASSERT_TRUE(odd.ok()) << odd.status();
  EXPECT_THAT(std::string(hf_family_of(*odd, variant_schema()).status().message()),
              HasSubstr("gpt2 needs position_embedding = learned, got alibi; bloom needs "
                        "embed_layernorm = true, got false"));
}

TEST(CheckpointHfTest, Transpose) {
  const HostSlice t{"x", {2, 3}, {0, 0}, {2, 3}, {1, 2, 3, 4, 5, 6}};
  const HostSlice u = transpose_2d(t);
  EXPECT_EQ(u.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(u.extent, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(u.data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  const HostSlice b{"b", {3}, {0}, {3}, {1, 2, 3}};
  EXPECT_EQ(transpose_2d(b).data, b.data);
}

}  // namespace
}  // namespace anvil::model
