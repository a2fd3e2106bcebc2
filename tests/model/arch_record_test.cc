// The model record of a checkpoint (model/arch_record.h): a 2-layer, 4-head GPT's record is
// refused by a run whose model computes something else with tensors of the same shapes (1 layer
// of 16 heads, another activation, ln_eps, position embedding, norm placement), with every
// differing key listed; finetune = true relaxes dropout and max_seq_len only; the tokenizer's
// type and file contents are part of the record; an older record (type only) is not checked.
#include "model/train/arch_record.h"

#include <map>
#include <string>

#include "gtest/gtest.h"
#include "tests/io/io_test_util.h"

namespace anvil::model {
namespace {

TrainConfig two_layers() {
  TrainConfig c;
  c.model.vocab_size = 96;
  c.model.max_seq_len = 16;
  c.model.d_model = 32;
  c.model.n_heads = 4;
  c.model.n_layers = 2;
  c.model.hidden_dropout = 0.1f;
  return c;
}

std::string refusal(const TrainConfig& saved_from, const TrainConfig& run) {
  const absl::Status s = check_checkpoint_model(checkpoint_model_record(saved_from), run, "CK");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(ArchRecordTest, SameModelLoads) {
  const TrainConfig c = two_layers();
  EXPECT_TRUE(check_checkpoint_model(checkpoint_model_record(c), c, "CK").ok());
}

TEST(ArchRecordTest, EveryKeyThatChangesATensorsMeaningIsChecked) {
  const TrainConfig saved = two_layers();
  struct Case {
    const char* want;
    void (*edit)(GptConfig&);
  };
  const Case cases[] = {
      {"[model] activation: checkpoint gelu, config gelu_erf",
       [](GptConfig& m) { m.activation = Activation::kGeluErf; }},
      {"[model] ln_eps: checkpoint 1e-05, config 1e-06", [](GptConfig& m) { m.ln_eps = 1e-6f; }},
      {"[model] position_embedding: checkpoint learned, config rotary",
       [](GptConfig& m) { m.position_embedding = PositionEmbedding::kRotary; }},
      {"[model] norm_placement: checkpoint pre, config post",
       [](GptConfig& m) { m.norm_placement = NormPlacement::kPost; }},
      {"[model] norm: checkpoint layernorm, config rmsnorm",
       [](GptConfig& m) { m.norm = Norm::kRmsNorm; }},
      {"[model] bias: checkpoint true, config false", [](GptConfig& m) { m.bias = false; }},
      {"[model] tie_embeddings: checkpoint true, config false",
       [](GptConfig& m) { m.tie_embeddings = false; }},
      {"[model] embed_layernorm: checkpoint false, config true",
       [](GptConfig& m) { m.embed_layernorm = true; }},
      {"[model] ffn_hidden: checkpoint 128, config 64", [](GptConfig& m) { m.ffn_hidden = 64; }},
      {"[model] vocab_size: checkpoint 96, config 97", [](GptConfig& m) { m.vocab_size = 97; }},
      {"[model] d_model: checkpoint 32, config 64",
       [](GptConfig& m) {
         m.d_model = 64;
         m.ffn_hidden = 128;
       }},
  };
  for (const Case& c : cases) {
    TrainConfig run = saved;
    c.edit(run.model);
    EXPECT_NE(refusal(saved, run).find(c.want), std::string::npos) << c.want;
  }
}

// Grouped-query attention is recorded; n_kv_heads = n_heads is the multi-head model. (A
// multi-head checkpoint's record has no n_kv_heads; a grouped-query run of it is refused by the
// c_attn shape.)
TEST(ArchRecordTest, GroupedQueryHeads) {
  TrainConfig gqa = two_layers();
  gqa.model.n_kv_heads = 2;
  TrainConfig mqa = gqa;
  mqa.model.n_kv_heads = 1;
  EXPECT_NE(refusal(gqa, mqa).find("[model] n_kv_heads: checkpoint 2, config 1"),
            std::string::npos);
  EXPECT_NE(refusal(gqa, two_layers()).find("[model] n_kv_heads: checkpoint 2, config (none)"),
            std::string::npos);
  EXPECT_TRUE(check_checkpoint_model(checkpoint_model_record(gqa), gqa, "CK").ok());
  TrainConfig mha = two_layers();
  mha.model.n_kv_heads = 4;
  EXPECT_TRUE(check_checkpoint_model(checkpoint_model_record(two_layers()), mha, "CK").ok());
}

// Rope scaling, a q/k/v-only bias and a sliding window are recorded when set (unset: records of
// older checkpoints stay equal); a run with other values is refused naming them.
TEST(ArchRecordTest, RopeScalingQkvBiasSlidingWindow) {
  TrainConfig rope = two_layers();
  rope.model.position_embedding = PositionEmbedding::kRotary;
  const std::map<std::string, std::string> plain = checkpoint_model_record(rope);
  EXPECT_EQ(plain.count("rope_scaling"), 0u);
  EXPECT_EQ(plain.count("qkv_bias"), 0u);
  EXPECT_EQ(plain.count("sliding_window"), 0u);
  TrainConfig l3 = rope;
  l3.model.rope_scaling.type = ops::RotaryScalingType::kLlama3;
  l3.model.rope_scaling.factor = 8.0f;
  TrainConfig l3b = l3;
  l3b.model.rope_scaling.original_max_position = 4096;
  EXPECT_NE(refusal(l3, l3b).find("[model] rope_original_max_position: checkpoint 8192, config "
                                  "4096"),
            std::string::npos);
  EXPECT_NE(refusal(l3, rope).find("[model] rope_scaling: checkpoint llama3, config (none)"),
            std::string::npos);
  TrainConfig qwen = rope;
  qwen.model.bias = false;
  qwen.model.qkv_bias = true;
  TrainConfig nobias = qwen;
  nobias.model.qkv_bias = false;
  EXPECT_NE(refusal(qwen, nobias).find("[model] qkv_bias: checkpoint true, config (none)"),
            std::string::npos);
  TrainConfig sw = rope;
  sw.model.sliding_window = 4096;
  EXPECT_NE(refusal(sw, rope).find("[model] sliding_window: checkpoint 4096, config (none)"),
            std::string::npos);
  EXPECT_TRUE(check_checkpoint_model(checkpoint_model_record(l3), l3, "CK").ok());
}

// The issue's case: same tensor shapes (d_model 32), another function. Both keys are named.
TEST(ArchRecordTest, ListsEveryDifferingKey) {
  TrainConfig run = two_layers();
  run.model.n_layers = 1;
  run.model.n_heads = 16;
  const std::string m = refusal(two_layers(), run);
  EXPECT_NE(m.find("CK was saved from another model ([model] n_heads: checkpoint 4, config 16; "
                   "[model] n_layers: checkpoint 2, config 1)"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("finetune = true may change max_seq_len, hidden_dropout, attention_dropout"),
            std::string::npos)
      << m;
}

TEST(ArchRecordTest, FinetuneRelaxesDropoutAndLengthOnly) {
  TrainConfig run = two_layers();
  run.model.hidden_dropout = 0.0f;
  run.model.attention_dropout = 0.2f;
  run.model.max_seq_len = 32;
  EXPECT_NE(refusal(two_layers(), run).find("[model] hidden_dropout: checkpoint 0.1, config 0"),
            std::string::npos);
  run.checkpoint.finetune = true;
  EXPECT_TRUE(check_checkpoint_model(checkpoint_model_record(two_layers()), run, "CK").ok());
  run.model.n_layers = 3;
  EXPECT_NE(refusal(two_layers(), run).find("[model] n_layers: checkpoint 2, config 3"),
            std::string::npos);
}

TEST(ArchRecordTest, BertKeysAndAnotherFamily) {
  TrainConfig bert = two_layers();
  bert.family = "bert";
  bert.model.type_vocab_size = 2;
  TrainConfig run = bert;
  run.model.type_vocab_size = 3;
  EXPECT_NE(refusal(bert, run).find("[model] type_vocab_size: checkpoint 2, config 3"),
            std::string::npos);
  // Another family: the type alone.
  const std::string m = refusal(bert, two_layers());
  EXPECT_NE(m.find("another model ([model] type: checkpoint bert, config gpt)"), std::string::npos)
      << m;
}

TEST(ArchRecordTest, TokenizerTypeAndFileContents) {
  io::testing::ScratchDir dir;
  io::testing::write_file(dir.file("vocab.json"), R"({"a": 0})");
  io::testing::write_file(dir.file("merges.txt"), "#version: 0.2\n");
  TrainConfig saved = two_layers();
  saved.tokenizer = {"GPT2BPE", dir.file("vocab.json"), dir.file("merges.txt"), 0};
  const std::map<std::string, std::string> record = checkpoint_model_record(saved);
  EXPECT_TRUE(check_checkpoint_model(record, saved, "CK").ok());

  TrainConfig run = saved;  // the same contents elsewhere: the same tokenizer
  io::testing::write_file(dir.file("vocab2.json"), R"({"a": 0})");
  run.tokenizer.vocab_file = dir.file("vocab2.json");
  EXPECT_TRUE(check_checkpoint_model(record, run, "CK").ok());

  io::testing::write_file(dir.file("vocab2.json"), R"({"b": 0})");
  absl::Status s = check_checkpoint_model(record, run, "CK");
  EXPECT_NE(s.message().find("[tokenizer] files: checkpoint "), std::string::npos) << s;

  run.tokenizer = {};
  s = check_checkpoint_model(record, run, "CK");
  EXPECT_NE(s.message().find("[tokenizer] type: checkpoint GPT2BPE, config (none)"),
            std::string::npos)
      << s;
  run.checkpoint.finetune = true;  // a finetune keeps the tokenizer too
  EXPECT_FALSE(check_checkpoint_model(record, run, "CK").ok());
}

TEST(ArchRecordTest, OlderRecordsAreNotChecked) {
  TrainConfig run = two_layers();
  run.model.n_layers = 7;
  EXPECT_TRUE(check_checkpoint_model({{"type", "gpt"}}, run, "CK").ok());
  EXPECT_TRUE(check_checkpoint_model({}, run, "CK").ok());
}

}  // namespace
}  // namespace anvil::model
