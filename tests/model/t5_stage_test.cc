// T5's pipeline layout: t5_stage_layers (the encoder's layers evenly over stages [0, split), the
// decoder's over [split, pp), errors naming the numbers), which parameters each stage's table
// holds (the shared embedding where a stack starts and under the tied head, a copy of a
// relative table on every stage of its stack, the final norms and lm_head at the ends), and
// [parallel] pp_split_rank's default (pp / 2) and validation errors.
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "model/t5/t5_impl.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

using ::testing::HasSubstr;

T5Config layers(int64_t enc, int64_t dec, T5Version v = T5Version::kV1_0) {
  T5Config c;
  c.vocab_size = 37;
  c.d_model = 16;
  c.d_kv = 4;
  c.n_heads = 4;
  c.d_ff = 24;
  c.n_encoder_layers = enc;
  c.n_decoder_layers = dec;
  c.num_buckets = 8;
  c.version = v;
  return c;
}

void expect_layers(const T5Config& c, int pp, int split, int stage, T5StageLayers want) {
  absl::StatusOr<T5StageLayers> l = t5_stage_layers(c, pp, split, stage);
  ASSERT_TRUE(l.ok()) << l.status();
  EXPECT_EQ(l->enc_begin, want.enc_begin) << "pp " << pp << " split " << split << " " << stage;
  EXPECT_EQ(l->enc_end, want.enc_end) << "pp " << pp << " split " << split << " " << stage;
  EXPECT_EQ(l->dec_begin, want.dec_begin) << "pp " << pp << " split " << split << " " << stage;
  EXPECT_EQ(l->dec_end, want.dec_end) << "pp " << pp << " split " << split << " " << stage;
}

TEST(T5StageLayers, SplitsEachStackEvenly) {
  expect_layers(layers(6, 4), 1, 0, 0, {0, 6, 0, 4});
  expect_layers(layers(6, 4), 2, 1, 0, {0, 6, 0, 0});
  expect_layers(layers(6, 4), 2, 1, 1, {0, 0, 0, 4});
  // pp 5, split 3: 2 encoder layers on each of stages 0-2, 2 decoder layers on stages 3-4.
  expect_layers(layers(6, 4), 5, 3, 0, {0, 2, 0, 0});
  expect_layers(layers(6, 4), 5, 3, 2, {4, 6, 0, 0});
  expect_layers(layers(6, 4), 5, 3, 3, {0, 0, 0, 2});
  expect_layers(layers(6, 4), 5, 3, 4, {0, 0, 2, 4});
}

TEST(T5StageLayers, RejectsBadSplits) {
  for (int split : {0, 4, -1}) {
    absl::StatusOr<T5StageLayers> l = t5_stage_layers(layers(6, 6), 4, split, 0);
    ASSERT_FALSE(l.ok()) << split;
    EXPECT_THAT(l.status().message(), HasSubstr("outside [1, pp - 1 = 3]"));
  }
  absl::StatusOr<T5StageLayers> l = t5_stage_layers(layers(6, 6), 5, 4, 0);  // 6 over 4 stages
  ASSERT_FALSE(l.ok());
  EXPECT_THAT(l.status().message(), HasSubstr("6 encoder layers over 4 stages"));
  EXPECT_FALSE(t5_stage_layers(layers(6, 6), 2, 1, 2).ok());  // no stage 2 of 2
}

std::set<std::string> names(const T5Config& c, int pp, int split, int stage) {
  T5Shard s;
  s.pp = pp;
  s.pp_split = split;
  s.pp_rank = stage;
  std::set<std::string> out;
  const ParamTable t = t5_detail::make_t5_param_table(c, s);
  for (const Param& p : t.all()) out.insert(p.name);
  return out;
}

TEST(T5StageLayers, StageTablesHoldTheirParameters) {
  const std::string rel_enc =
      "encoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  const std::string rel_dec =
      "decoder.block.0.layer.0.SelfAttention.relative_attention_bias.weight";
  // v1.0, pp 4, split 2: 2 encoder + 2 decoder layers, one per stage.
  const T5Config tied = layers(2, 2);
  const std::set<std::string> s0 = names(tied, 4, 2, 0), s1 = names(tied, 4, 2, 1);
  const std::set<std::string> s2 = names(tied, 4, 2, 2), s3 = names(tied, 4, 2, 3);
  EXPECT_TRUE(s0.count("shared.weight") && s0.count(rel_enc) && !s0.count(rel_dec));
  EXPECT_FALSE(s0.count("encoder.block.1.layer.0.SelfAttention.qkv.weight"));
  EXPECT_TRUE(!s1.count("shared.weight") && s1.count(rel_enc));
  EXPECT_TRUE(s1.count("encoder.block.1.layer.0.SelfAttention.qkv.weight"));
  EXPECT_TRUE(s1.count("encoder.final_layer_norm.weight"));
  EXPECT_TRUE(s2.count("shared.weight") && s2.count(rel_dec) && !s2.count(rel_enc));
  EXPECT_TRUE(s3.count("shared.weight") && s3.count(rel_dec));  // the tied LM head
  EXPECT_TRUE(s3.count("decoder.final_layer_norm.weight") && !s3.count("lm_head.weight"));
  // Shared over the pipeline: the embedding on stages 0, 2, 3 and each relative table.
  T5Shard sh;
  sh.pp = 4;
  sh.pp_split = 2;
  const std::vector<t5_detail::SharedParam> shared = t5_detail::pipeline_shared_params(tied, sh);
  ASSERT_EQ(shared.size(), 3u);
  EXPECT_EQ(shared[0].name, "shared.weight");
  EXPECT_EQ(shared[0].stages, (std::vector<int>{0, 2, 3}));
  EXPECT_EQ(shared[1].stages, (std::vector<int>{0, 1}));
  EXPECT_EQ(shared[2].stages, (std::vector<int>{2, 3}));
  // v1.1 (untied): the last stage has lm_head, not the embedding; pp 2: nothing shared but
  // the embedding.
  const T5Config untied = layers(2, 2, T5Version::kV1_1);
  const std::set<std::string> u3 = names(untied, 4, 2, 3);
  EXPECT_TRUE(!u3.count("shared.weight") && u3.count("lm_head.weight"));
  sh.pp = 2;
  sh.pp_split = 1;
  const std::vector<t5_detail::SharedParam> pp2 = t5_detail::pipeline_shared_params(untied, sh);
  ASSERT_EQ(pp2.size(), 1u);
  EXPECT_EQ(pp2[0].stages, (std::vector<int>{0, 1}));
}

constexpr char kT5[] = R"([model]
type = t5
vocab_size = 30
max_seq_len = 16
d_model = 8
n_heads = 2
n_layers = 4
decoder_layers = 2
[data]
path = data/demo/kjv_t5_text_sentence
seq_len = 8
decoder_seq_len = 4
[tokenizer]
type = BertWordPieceLowerCase
vocab_file = data/bert/vocab.txt
vocab_extra_ids = 100
[train]
micro_batch = 2
global_batch = 4
steps = 10
device = cpu
)";

absl::StatusOr<TrainConfig> load(const std::vector<std::string>& overrides, int world) {
  return load_train_config_string(kT5, "t5.ini", overrides, nullptr, world);
}

TEST(T5StageLayers, PpSplitRankConfig) {
  absl::StatusOr<TrainConfig> c = load({"parallel.pp=2"}, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->parallel.pp_split_rank, 1);  // pp / 2
  c = load({"parallel.pp=3", "parallel.pp_split_rank=2"}, 3);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->parallel.pp_split_rank, 2);
  // 2 + 2 layers over 4 stages: one layer each (GPT's chunk partition does not apply).
  c = load({"parallel.pp=4", "model.n_layers=2"}, 4);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->parallel.pp_split_rank, 2);
  for (const auto& [split, pp, want] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"3", "3", "outside [1, pp - 1 = 2]"},
           {"-1", "3", "outside [1, pp - 1 = 2]"},
           {"1", "1", "needs pp > 1"},
           // 4 encoder layers over 3 stages.
           {"3", "4", "4 encoder layers over 3 stages"}}) {
    c = load({"parallel.pp=" + pp, "parallel.pp_split_rank=" + split}, std::stoi(pp));
    ASSERT_FALSE(c.ok()) << split << " of " << pp;
    EXPECT_THAT(c.status().message(), HasSubstr("pp_split_rank")) << c.status();
    EXPECT_THAT(c.status().message(), HasSubstr(want)) << c.status();
  }
  c = load({"parallel.pp=2", "parallel.virtual_stages=2"}, 2);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("one model chunk per pipeline stage"));
}

TEST(T5StageLayers, SequenceParallelAndRecomputeConfig) {
  absl::StatusOr<TrainConfig> c =
      load({"parallel.tp=2", "parallel.sequence_parallel=true", "parallel.recompute=full"}, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->parallel.sequence_parallel);
  EXPECT_EQ(c->parallel.recompute, "full");
  ASSERT_TRUE(load({"parallel.recompute=selective"}, 1).ok());
  // 1 * 3 decoder rows over 2 TP ranks.
  c = load({"parallel.tp=2", "parallel.sequence_parallel=true", "data.decoder_seq_len=3",
            "train.micro_batch=1", "train.global_batch=2"},
           2);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("sequence_parallel")) << c.status();
  EXPECT_THAT(c.status().message(), HasSubstr("decoder_seq_len (3)")) << c.status();
  // Every ZeRO stage works for t5 (parallel/grad_sync.h), also over a DP group of one
  // (reduce_single_rank: tests/parallel/t5_state_test.cc runs it).
  for (const char* stage : {"1", "2", "3"}) {
    ASSERT_TRUE(load({"parallel.dp=2", std::string("parallel.zero_stage=") + stage}, 2).ok());
    EXPECT_TRUE(
        load({"parallel.reduce_single_rank=true", std::string("parallel.zero_stage=") + stage}, 1)
            .ok());
  }
}

}  // namespace
}  // namespace anvil::model
