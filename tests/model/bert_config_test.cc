// [model] type = bert and its keys (causal off, token types, binary head), the refusals of
// BERT-only options on GPT, and the BERT sample record: width, field order and its decoding into
// a micro-batch row (targets only where loss_mask is set, the length from the padding mask,
// the binary label only with the binary head), with bad records a fatal error naming the sample.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/infer/gpt_inference.h"
#include "model/train/family.h"
#include "model/train/sample_record.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

constexpr char kBert[] = R"([model]
type = bert
vocab_size = 30
max_seq_len = 16
d_model = 8
n_heads = 2
n_layers = 2
[data]
path = data/demo/kjv_text_document
seq_len = 8
[train]
micro_batch = 2
global_batch = 4
steps = 10
)";

absl::StatusOr<TrainConfig> load(const std::vector<std::string>& overrides = {}) {
  return load_train_config_string(kBert, "bert.ini", overrides);
}

TEST(BertConfigTest, TypeBertSetsTheEncoderOptions) {
  absl::StatusOr<TrainConfig> c = load();
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->family, "bert");
  EXPECT_EQ(c->model.head, Head::kMlm);
  EXPECT_FALSE(c->model.causal);
  EXPECT_EQ(c->model.type_vocab_size, 2);
  EXPECT_TRUE(c->model.binary_head);
  EXPECT_EQ(c->model.norm_placement, NormPlacement::kPre);
  c = load({"model.norm_placement=post", "model.activation=gelu_erf",
            "model.bert_binary_head=false", "model.type_vocab_size=3",
            "model.embed_layernorm=true"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model.norm_placement, NormPlacement::kPost);
  EXPECT_EQ(c->model.activation, Activation::kGeluErf);
  EXPECT_FALSE(c->model.binary_head);
  EXPECT_EQ(c->model.type_vocab_size, 3);
  EXPECT_TRUE(c->model.embed_layernorm);
}

// Generation, serving and evaluation (GptInference) are for causal models.
TEST(BertConfigTest, InferenceRefusesBert) {
  absl::StatusOr<TrainConfig> c = load();
  ASSERT_TRUE(c.ok()) << c.status();
  auto plan = GptInference::plan(c->model, InferenceShape{1, 8}, Precision{});
  ASSERT_FALSE(plan.ok());
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("causal"));
}

TEST(BertConfigTest, RefusesBadCombinations) {
  absl::StatusOr<TrainConfig> c = load({"model.type=t9"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("t9"));
  c = load({"model.type_vocab_size=0"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("type_vocab_size"));
  c = load({"model.activation=swiglu"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("type bert"));
  // GPT keeps its defaults: causal, no token types, no binary head.
  c = load({"model.type=gpt"});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->model.causal);
  EXPECT_EQ(c->model.type_vocab_size, 0);
  EXPECT_FALSE(c->model.binary_head);
  EXPECT_EQ(c->model.head, Head::kLm);
  // Which family may use which encoder feature is the family's rule (Family::model_features).
  GptConfig g;
  g.causal = false;
  absl::StatusOr<engine::Config> raw =
      engine::Config::load_string(kBert, "bert.ini", train_config_schema(), {"model.type=gpt"});
  ASSERT_TRUE(raw.ok()) << raw.status();
  absl::StatusOr<const Family*> gpt = find_family("gpt");
  ASSERT_TRUE(gpt.ok());
  EXPECT_THAT(std::string((*gpt)->model_features(*raw, g).message()), HasSubstr("type bert"));
  // GPT's eod handling and the causal-LM [eval] tasks are refused, naming the key.
  c = load({"data.eod_mask_loss=true"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("eod_mask_loss"));
  c = load({"eval.lambada=x.jsonl", "tokenizer.type=Byte"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("[eval]"));
  c = load({"data.mask_prob=1.5"});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("mask_prob"));
}

// A record of T = 4: tokens | types | labels | loss_mask | padding_mask | is_random.
std::vector<int32_t> record() {
  return {2,  7, 9,  0,   // tokens ([CLS] a b [PAD])
          0,  0, 1,  0,   // types
          -1, 5, -1, -1,  // labels
          0,  1, 0,  0,   // loss_mask
          1,  1, 1,  0,   // padding_mask
          1};             // is_random
}

TEST(BertConfigTest, RecordLayoutAndDecoding) {
  EXPECT_EQ(bert_record_width(4), 21);
  std::vector<int32_t> rec = record();
  const BertRecord r = bert_record(rec.data(), 4);
  EXPECT_EQ(r.types[2], 1);
  EXPECT_EQ(r.labels[1], 5);
  EXPECT_EQ(r.padding_mask[3], 0);
  EXPECT_EQ(*r.is_random, 1);

  GptConfig cfg;
  cfg.vocab_size = 30;
  cfg.type_vocab_size = 2;
  cfg.binary_head = true;
  std::vector<int32_t> tokens(8, -7), types(8, -7), targets(8, -7), lengths(2, -7), bin(2, -7);
  // Row 1 of a two-sample micro-batch.
  EXPECT_EQ(decode_bert_record(cfg, 11, 4, rec.data(), tokens.data() + 4, types.data() + 4,
                               targets.data() + 4, lengths.data(), bin.data(), 1),
            1);
  EXPECT_EQ(std::vector<int32_t>(tokens.begin() + 4, tokens.end()),
            (std::vector<int32_t>{2, 7, 9, 0}));
  EXPECT_EQ(std::vector<int32_t>(types.begin() + 4, types.end()),
            (std::vector<int32_t>{0, 0, 1, 0}));
  EXPECT_EQ(std::vector<int32_t>(targets.begin() + 4, targets.end()),
            (std::vector<int32_t>{-1, 5, -1, -1}));
  EXPECT_EQ(lengths[1], 3);
  EXPECT_EQ(bin[1], 1);
  EXPECT_EQ(tokens[0], -7);  // row 0 untouched
  cfg.binary_head = false;
  decode_bert_record(cfg, 11, 4, rec.data(), tokens.data(), types.data(), targets.data(),
                     lengths.data(), bin.data(), 0);
  EXPECT_EQ(bin[0], -1);
}

TEST(BertConfigTest, BadRecordsAreFatal) {
  GptConfig cfg;
  cfg.vocab_size = 30;
  cfg.type_vocab_size = 2;
  std::vector<int32_t> t(4), y(4), g(4), len(1), bin(1);
  std::vector<int32_t> rec = record();
  rec[16 + 1] = 0;  // padding in the middle
  EXPECT_DEATH(decode_bert_record(cfg, 42, 4, rec.data(), t.data(), y.data(), g.data(), len.data(),
                                  bin.data(), 0),
               "BERT sample 42: padding_mask");
  rec = record();
  rec[5] = 2;  // token type 2 of a 2-type vocabulary
  EXPECT_DEATH(decode_bert_record(cfg, 43, 4, rec.data(), t.data(), y.data(), g.data(), len.data(),
                                  bin.data(), 0),
               "token type 2");
  rec = record();
  rec[9] = 30;  // a label outside the vocabulary
  EXPECT_DEATH(decode_bert_record(cfg, 44, 4, rec.data(), t.data(), y.data(), g.data(), len.data(),
                                  bin.data(), 0),
               "vocab_size 30");
}

}  // namespace
}  // namespace anvil::model
