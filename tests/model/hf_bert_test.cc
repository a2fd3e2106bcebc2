// Hugging Face BertForPreTraining conversion (model/bert/hf_bert.cc), against HF's names typed out
// here (transformers' modeling_bert.py):
//   a hand-built tiny HF BERT (2 layers, d 4, 2 heads, ffn 8, vocab 7) imports to anvil's
//   tensors, each checked element by element against its HF source: c_attn = [query; key;
//   value] by rows (weight and bias), everything else renamed; the tied decoder, its bias and
//   the position_ids buffer are skipped; names with or without the "bert." prefix;
//   anvil -> HF -> anvil is bitwise for random values under the names and logical shapes of a
//   real type-bert GptModel's parameter table (every parameter has an HF name);
//   config.json <-> [model]: BertConfig's fields, the family picked by type bert, Megatron's
//   pre-LN BERT and BERT without the binary head refused naming the setting.
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint_hf.h"
#include "model/hf_config.h"
#include "model/stack/gpt.h"
#include "model/train/train_config.h"
#include "tests/model/hf_test_tensors.h"
#include "tests/parallel/tiny_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::HostSlice;
using ::testing::HasSubstr;

using testing_hf::by_name;
using testing_hf::random_tensor;

// HF BertForPreTraining's state dict, d 4, ffn 8, vocab 7, 5 positions, 2 types, 2 layers,
// with what save_pretrained may add (the tied decoder and its bias, position_ids).
std::vector<HostSlice> hf_bert_tensors() {
  uint64_t s = 1;
  const std::string e = "bert.embeddings.";
  std::vector<HostSlice> t = {random_tensor(e + "word_embeddings.weight", {7, 4}, s++),
                              random_tensor(e + "position_embeddings.weight", {5, 4}, s++),
                              random_tensor(e + "token_type_embeddings.weight", {2, 4}, s++),
                              random_tensor(e + "LayerNorm.weight", {4}, s++),
                              random_tensor(e + "LayerNorm.bias", {4}, s++),
                              random_tensor(e + "position_ids", {1, 5}, s++),
                              random_tensor("bert.pooler.dense.weight", {4, 4}, s++),
                              random_tensor("bert.pooler.dense.bias", {4}, s++),
                              random_tensor("cls.predictions.bias", {7}, s++),
                              random_tensor("cls.predictions.decoder.weight", {7, 4}, s++),
                              random_tensor("cls.predictions.decoder.bias", {7}, s++),
                              random_tensor("cls.predictions.transform.dense.weight", {4, 4}, s++),
                              random_tensor("cls.predictions.transform.dense.bias", {4}, s++),
                              random_tensor("cls.predictions.transform.LayerNorm.weight", {4}, s++),
                              random_tensor("cls.predictions.transform.LayerNorm.bias", {4}, s++),
                              random_tensor("cls.seq_relationship.weight", {2, 4}, s++),
                              random_tensor("cls.seq_relationship.bias", {2}, s++)};
  for (int l = 0; l < 2; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".";
    for (const char* m : {"attention.self.query", "attention.self.key", "attention.self.value",
                          "attention.output.dense"}) {
      t.push_back(random_tensor(p + m + ".weight", {4, 4}, s++));
      t.push_back(random_tensor(p + m + ".bias", {4}, s++));
    }
    t.push_back(random_tensor(p + "intermediate.dense.weight", {8, 4}, s++));
    t.push_back(random_tensor(p + "intermediate.dense.bias", {8}, s++));
    t.push_back(random_tensor(p + "output.dense.weight", {4, 8}, s++));
    t.push_back(random_tensor(p + "output.dense.bias", {4}, s++));
    for (const char* ln : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      t.push_back(random_tensor(p + ln + ".weight", {4}, s++));
      t.push_back(random_tensor(p + ln + ".bias", {4}, s++));
    }
  }
  return t;
}

const std::vector<std::string> kSkipped = {"bert.embeddings.position_ids",
                                           "cls.predictions.decoder.weight",
                                           "cls.predictions.decoder.bias"};

TEST(HfBert, ImportsHfNamesToAnvilTensors) {
  const std::vector<HostSlice> hf = hf_bert_tensors();
  absl::StatusOr<std::vector<HostSlice>> anvil = from_hf_tensors(bert_hf_family(), hf, {2}, true);
  ASSERT_TRUE(anvil.ok()) << anvil.status();
  const std::map<std::string, HostSlice> a = by_name(*anvil), h = by_name(hf);
  // 5 embedding + 4 pooler/binary + 5 MLM-head tensors + 12 per layer (q, k, v fused in two).
  EXPECT_EQ(a.size(), 14u + 2 * 12u);
  const std::map<std::string, std::string> renamed = {
      {"wte.weight", "bert.embeddings.word_embeddings.weight"},
      {"wpe.weight", "bert.embeddings.position_embeddings.weight"},
      {"tokentype_embeddings.weight", "bert.embeddings.token_type_embeddings.weight"},
      {"wte_ln.weight", "bert.embeddings.LayerNorm.weight"},
      {"wte_ln.bias", "bert.embeddings.LayerNorm.bias"},
      {"pooler.dense.weight", "bert.pooler.dense.weight"},
      {"lm_head.dense.weight", "cls.predictions.transform.dense.weight"},
      {"lm_head.layernorm.bias", "cls.predictions.transform.LayerNorm.bias"},
      {"lm_head.bias", "cls.predictions.bias"},
      {"binary_head.weight", "cls.seq_relationship.weight"},
      {"binary_head.bias", "cls.seq_relationship.bias"},
      {"h.1.attn.c_proj.weight", "bert.encoder.layer.1.attention.output.dense.weight"},
      {"h.1.ln_1.weight", "bert.encoder.layer.1.attention.output.LayerNorm.weight"},
      {"h.0.mlp.c_fc.weight", "bert.encoder.layer.0.intermediate.dense.weight"},
      {"h.0.mlp.c_proj.weight", "bert.encoder.layer.0.output.dense.weight"},
      {"h.0.ln_2.bias", "bert.encoder.layer.0.output.LayerNorm.bias"}};
  for (const auto& [anvil_name, hf_name] : renamed) {
    ASSERT_EQ(a.count(anvil_name), 1u) << anvil_name;
    EXPECT_EQ(a.at(anvil_name).shape, h.at(hf_name).shape) << anvil_name;
    EXPECT_EQ(a.at(anvil_name).data, h.at(hf_name).data) << anvil_name;
  }
  // c_attn rows: query's 4, then key's, then value's (weight [12, 4], bias [12]).
  for (int l = 0; l < 2; ++l) {
    const std::string p = "bert.encoder.layer." + std::to_string(l) + ".attention.self.";
    const HostSlice& w = a.at("h." + std::to_string(l) + ".attn.c_attn.weight");
    const HostSlice& b = a.at("h." + std::to_string(l) + ".attn.c_attn.bias");
    ASSERT_EQ(w.shape, (std::vector<int64_t>{12, 4}));
    ASSERT_EQ(b.shape, (std::vector<int64_t>{12}));
    const char* parts[] = {"query", "key", "value"};
    for (int k = 0; k < 3; ++k) {
      const std::vector<float>& hw = h.at(p + parts[k] + ".weight").data;
      const std::vector<float>& hb = h.at(p + parts[k] + ".bias").data;
      for (int r = 0; r < 4; ++r) {
        EXPECT_EQ(b.data[k * 4 + r], hb[r]) << parts[k];
        for (int c = 0; c < 4; ++c) EXPECT_EQ(w.data[(k * 4 + r) * 4 + c], hw[r * 4 + c]);
      }
    }
  }
  // Export gives back every HF tensor but the skipped ones, bitwise, under HF's names.
  absl::StatusOr<std::vector<HostSlice>> back = to_hf_tensors(bert_hf_family(), *anvil, {2});
  ASSERT_TRUE(back.ok()) << back.status();
  const std::map<std::string, HostSlice> got = by_name(*back);
  EXPECT_EQ(got.size(), hf.size() - kSkipped.size());
  for (const HostSlice& t : hf) {
    if (std::find(kSkipped.begin(), kSkipped.end(), t.tensor) != kSkipped.end()) continue;
    ASSERT_EQ(got.count(t.tensor), 1u) << t.tensor;
    EXPECT_EQ(got.at(t.tensor).shape, t.shape) << t.tensor;
    EXPECT_EQ(got.at(t.tensor).data, t.data) << t.tensor;
  }
  // The Hub's bert-base-uncased names its LayerNorms' parameters gamma and beta.
  std::vector<HostSlice> old = hf;
  int renamed_ln = 0;
  for (HostSlice& t : old) {
    for (const auto& [now, was] :
         {std::pair<std::string, std::string>{"LayerNorm.weight", "LayerNorm.gamma"},
          {"LayerNorm.bias", "LayerNorm.beta"}}) {
      const size_t at = t.tensor.find(now);
      if (at == std::string::npos) continue;
      t.tensor.replace(at, now.size(), was);
      ++renamed_ln;
    }
  }
  EXPECT_EQ(renamed_ln, 2 + 2 + 2 * 4);  // embeddings, MLM transform, 2 per layer
  absl::StatusOr<std::vector<HostSlice>> a_old = from_hf_tensors(bert_hf_family(), old, {2}, true);
  ASSERT_TRUE(a_old.ok()) << a_old.status();
  EXPECT_EQ(by_name(*a_old).size(), a.size());
  for (const auto& [name, t] : by_name(*a_old)) EXPECT_EQ(t.data, a.at(name).data) << name;
  // Names without "bert." (a bare BertModel's) import the same; an unknown tensor is an error.
  std::vector<HostSlice> bare = hf;
  for (HostSlice& t : bare) {
    if (t.tensor.rfind("bert.", 0) == 0) t.tensor = t.tensor.substr(5);
  }
  absl::StatusOr<std::vector<HostSlice>> a2 = from_hf_tensors(bert_hf_family(), bare, {2}, true);
  ASSERT_TRUE(a2.ok()) << a2.status();
  EXPECT_EQ(by_name(*a2).at("h.1.attn.c_attn.weight").data, a.at("h.1.attn.c_attn.weight").data);
  std::vector<HostSlice> extra = hf;
  extra.push_back(
      random_tensor("bert.encoder.layer.0.attention.self.distance_embedding.weight", {3, 4}, 99));
  EXPECT_THAT(std::string(from_hf_tensors(bert_hf_family(), extra, {2}, true).status().message()),
              HasSubstr("distance_embedding"));
}

TEST(HfBert, EveryParameterOfAnvilsBertRoundTrips) {
  GptConfig c;
  testing_parallel::use_hf_bert(c);
  c.vocab_size = 37;  // padded to 64 in the model, unpadded in the logical tensors
  c.max_seq_len = 8;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  auto m = GptModel::create(c, {2, 8}, {engine::Device::kCpu, engine::DType::kF32}, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  std::vector<HostSlice> anvil;
  uint64_t seed = 7;
  for (const Param& p : (*m)->params().all()) {
    std::vector<int64_t> shape = p.shape;
    if (p.vocab_rows) shape[0] = c.vocab_size;
    anvil.push_back(random_tensor(p.name, shape, seed++));
  }
  absl::StatusOr<std::vector<HostSlice>> hf = to_hf_tensors(bert_hf_family(), anvil, {2});
  ASSERT_TRUE(hf.ok()) << hf.status();
  const std::map<std::string, HostSlice> h = by_name(*hf);
  EXPECT_EQ(h.count("bert.encoder.layer.1.attention.self.value.bias"), 1u);
  EXPECT_EQ(h.at("bert.embeddings.word_embeddings.weight").shape, (std::vector<int64_t>{37, 8}));
  EXPECT_EQ(h.at("cls.predictions.bias").shape, (std::vector<int64_t>{37}));
  absl::StatusOr<std::vector<HostSlice>> back = from_hf_tensors(bert_hf_family(), *hf, {2}, true);
  ASSERT_TRUE(back.ok()) << back.status();
  const std::map<std::string, HostSlice> b = by_name(*back);
  ASSERT_EQ(b.size(), anvil.size());
  for (const HostSlice& t : anvil) {
    ASSERT_EQ(b.count(t.tensor), 1u) << t.tensor;
    EXPECT_EQ(b.at(t.tensor).shape, t.shape) << t.tensor;
    EXPECT_EQ(b.at(t.tensor).data, t.data) << t.tensor;
  }
}

HfJsonFields bert_json() {
  return {{"model_type", "\"bert\""},
          {"architectures", "[\"BertForPreTraining\"]"},
          {"vocab_size", "30522"},
          {"hidden_size", "768"},
          {"num_hidden_layers", "12"},
          {"num_attention_heads", "12"},
          {"intermediate_size", "3072"},
          {"hidden_act", "\"gelu\""},
          {"hidden_dropout_prob", "0.1"},
          {"attention_probs_dropout_prob", "0.1"},
          {"max_position_embeddings", "512"},
          {"type_vocab_size", "2"},
          {"initializer_range", "0.02"},
          {"layer_norm_eps", "1e-12"},
          {"pad_token_id", "0"},
          {"position_embedding_type", "\"absolute\""}};
}

TEST(HfBert, ConfigImportAndExport) {
  const engine::ConfigSchema& schema = train_config_schema();
  absl::StatusOr<HfImportedModel> m =
      hf_import_model(bert_hf_family(), bert_json(), schema, "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->tied);
  EXPECT_EQ(m->dims.n_heads, 12);
  for (const char* line :
       {"type = bert\n", "vocab_size = 30522\n", "d_model = 768\n", "n_layers = 12\n",
        "n_heads = 12\n", "ffn_hidden = 3072\n", "max_seq_len = 512\n", "type_vocab_size = 2\n",
        "ln_eps = 1e-12\n", "hidden_dropout = 0.1\n", "attention_dropout = 0.1\n",
        "norm_placement = post\n", "activation = gelu_erf\n", "embed_layernorm = true\n",
        "bert_binary_head = true\n"}) {
    EXPECT_THAT(m->ini, HasSubstr(line));
  }
  absl::StatusOr<engine::Config> cfg = engine::Config::load_string(m->ini, "imported", schema);
  ASSERT_TRUE(cfg.ok()) << cfg.status();
  ASSERT_EQ(hf_family_of(*cfg, schema).value(), &bert_hf_family());
  const HfJsonFields back = hf_config_fields(bert_hf_family(), *cfg, schema);
  for (const char* k :
       {"vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "layer_norm_eps",
        "type_vocab_size", "hidden_act", "position_embedding_type", "max_position_embeddings"}) {
    EXPECT_EQ(back.at(k), bert_json().at(k)) << k;
  }
  // Another activation is not this family.
  HfJsonFields relu = bert_json();
  relu["hidden_act"] = "\"relu\"";
  EXPECT_THAT(
      std::string(hf_import_model(bert_hf_family(), relu, schema, "c.json").status().message()),
      HasSubstr("hidden_act is \"relu\"; anvil's bert implements \"gelu\""));
  // Megatron's BERT layout (pre-LN) and BERT without the binary head have no HF family here.
  for (const char* key : {"norm_placement", "bert_binary_head"}) {
    const std::string was = std::string(key) == "norm_placement" ? "post" : "true";
    const std::string now = was == "post" ? "pre" : "false";
    std::string ini = m->ini;
    const std::string line = std::string(key) + " = " + was + "\n";
    ini.replace(ini.find(line), line.size(), std::string(key) + " = " + now + "\n");
    absl::StatusOr<engine::Config> other = engine::Config::load_string(ini, "other", schema);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_THAT(std::string(hf_family_of(*other, schema).status().message()),
                HasSubstr(absl::StrCat("bert needs ", key, " = ", was, ", got ", now)));
  }
  // GPT-2's options under type bert are not GPT-2; type t5 picks a T5 family, not BERT's.
  absl::StatusOr<engine::Config> t5 =
      engine::Config::load_string("[model]\ntype = t5\n", "t5", schema);
  ASSERT_TRUE(t5.ok()) << t5.status();
  absl::StatusOr<const HfFamily*> t5_family = hf_family_of(*t5, schema);
  ASSERT_TRUE(t5_family.ok()) << t5_family.status();
  EXPECT_EQ((*t5_family)->model_type, "t5");
}

}  // namespace
}  // namespace anvil::model
