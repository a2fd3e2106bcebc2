// [parallel]: dp inferred from the launched ranks, the checks against the world size, the batch
// shape and the model (heads / ffn / vocabulary vs tp, layers vs pp chunks), the pipeline layer
// partition, sequence parallelism and the ZeRO stages.
#include "parallel/parallel_config.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

using testing::HasSubstr;

constexpr char kIni[] =
    "[train]\n"
    "micro_batch = 2\n"
    "global_batch = 16\n"
    "[parallel]\n"
    "zero_stage = 1\n";

absl::StatusOr<TrainConfig> load(int world, std::vector<std::string> overrides = {}) {
  return load_train_config_string(kIni, "x.ini", overrides, nullptr, world);
}

std::string error(int world, std::vector<std::string> overrides) {
  auto c = load(world, std::move(overrides));
  EXPECT_FALSE(c.ok());
  return c.ok() ? "" : std::string(c.status().message());
}

TEST(ParallelConfigTest, DefaultsAndInferredDp) {
  auto one = load(1);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ(one->parallel.dp, 1);
  EXPECT_EQ(one->parallel.tp, 1);
  EXPECT_EQ(one->parallel.pp, 1);
  EXPECT_EQ(one->parallel.zero_stage, 1);
  EXPECT_EQ(one->parallel.bucket_elems(), 25 * (1 << 20));
  EXPECT_EQ(one->parallel.timeout_s, 600.0);
  EXPECT_FALSE(one->parallel.reduce_single_rank);
  auto four = load(4);
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->parallel.dp, 4);
  EXPECT_EQ(four->train.accumulation_steps(four->parallel.dp), 2);
  auto explicit_dp = load(8, {"parallel.dp=8", "parallel.bucket_mb=0", "parallel.timeout_s=30"});
  ASSERT_TRUE(explicit_dp.ok()) << explicit_dp.status();
  EXPECT_EQ(explicit_dp->parallel.dp, 8);
  EXPECT_EQ(explicit_dp->parallel.bucket_elems(), 0);
  EXPECT_EQ(explicit_dp->parallel.timeout_s, 30.0);
}

TEST(ParallelConfigTest, OffloadOptimizer) {
  auto off = load(2, {"parallel.offload_optimizer=true", "parallel.offload_threads=3"});
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_TRUE(off->parallel.offload_optimizer);
  EXPECT_EQ(off->parallel.offload_threads, 3);
  EXPECT_FALSE(load(1)->parallel.offload_optimizer);
  EXPECT_THAT(error(2, {"parallel.offload_optimizer=true", "parallel.zero_stage=3"}),
              HasSubstr("[parallel] offload_optimizer: is not implemented with zero_stage 3"));
  EXPECT_THAT(error(1, {"parallel.offload_threads=-1"}), HasSubstr("[parallel] offload_threads"));
  // T5 offloads too (tests/parallel/t5_state_test.cc T5OffloadTest).
  auto t5 = load(1, {"parallel.offload_optimizer=true", "model.type=t5", "tokenizer.type=Byte",
                     "tokenizer.vocab_extra_ids=100"});
  ASSERT_TRUE(t5.ok()) << t5.status();
  EXPECT_TRUE(t5->parallel.offload_optimizer);
}

TEST(ParallelConfigTest, ErrorsNameTheNumbers) {
  EXPECT_THAT(error(2, {"parallel.dp=4"}),
              HasSubstr("[parallel] dp: tp 1 * dp 4 * pp 1 = 4 does not match the 2 launched "
                        "ranks"));
  EXPECT_THAT(error(16, {}), HasSubstr("[train] global_batch: 16 is not a multiple of [train] "
                                       "micro_batch 2 * [parallel] dp 16 = 32"));
  EXPECT_THAT(error(1, {"parallel.tp=0"}), HasSubstr("[parallel] tp: must be >= 1, got 0"));
  EXPECT_THAT(error(1, {"parallel.zero_stage=4"}), HasSubstr("must be 0, 1, 2 or 3, got 4"));
  EXPECT_THAT(error(1, {"parallel.bucket_mb=-1"}), HasSubstr("[parallel] bucket_mb"));
  EXPECT_THAT(error(1, {"parallel.timeout_s=0"}), HasSubstr("[parallel] timeout_s"));
  // Huge values are bounded, not truncated or wrapped.
  EXPECT_THAT(error(1, {"parallel.bucket_mb=9223372036854775807"}),
              HasSubstr("[parallel] bucket_mb: must be in [0, 2^20 = 1048576]"));
  EXPECT_THAT(error(1, {"parallel.timeout_s=9223372036854775807"}),
              HasSubstr("[parallel] timeout_s: must be in [1, 2^31 - 1"));
  EXPECT_THAT(error(1, {"parallel.pp=2", "parallel.virtual_stages=4294967297"}),
              HasSubstr("[parallel] virtual_stages: 4294967297 exceeds the limit 2^16"));
}

// One rule, one wording: the batch and tensor-parallel rules as parallel/parallel_config.h words
// them, from the config, the trainer's guard and both models' shards alike.
TEST(ParallelConfigTest, LayoutRulesWordedOnce) {
  EXPECT_TRUE(parallel::check_batch_split(32, 2, 16).ok());
  EXPECT_EQ(parallel::check_batch_split(16, 2, 16).message(),
            "16 is not a multiple of [train] micro_batch 2 * [parallel] dp 16 = 32");
  EXPECT_FALSE(parallel::check_batch_split(4, 0, 1).ok());
  EXPECT_TRUE(parallel::check_tp_split("[model] n_heads", 12, 4).ok());
  EXPECT_EQ(parallel::check_tp_split("[model] n_heads", 12, 5).message(),
            "[model] n_heads 12 is not divisible by [parallel] tp 5");
  GptConfig gpt;  // 12 heads, ffn 3072, padded vocabulary 50304
  GptShard gpt_shard;
  gpt_shard.tp = 5;
  EXPECT_EQ(gpt_shard.validate(gpt).message(),
            "tensor parallelism: [model] n_heads 12 is not divisible by [parallel] tp 5");
  gpt.n_heads = 16;
  gpt_shard.tp = 8;
  gpt.padded_vocab = 50260;
  EXPECT_EQ(gpt_shard.validate(gpt).message(),
            "tensor parallelism: [model] padded_vocab 50260 is not divisible by [parallel] tp 8; "
            "set [model] vocab_multiple to 128 * tp");
  T5Config t5;  // 8 heads
  T5Shard t5_shard;
  t5_shard.tp = 3;
  EXPECT_EQ(t5_shard.validate(t5).message(),
            "T5 shard: [model] n_heads 8 is not divisible by [parallel] tp 3");
}

TEST(ParallelConfigTest, LayoutsAgainstTheModel) {
  // The default model is GPT-2 124M: 12 layers, 12 heads, ffn 3072, vocabulary 50257.
  auto tp2 = load(2, {"parallel.tp=2"});
  ASSERT_TRUE(tp2.ok()) << tp2.status();
  EXPECT_EQ(tp2->model.padded(), 50432);  // a multiple of 128 * 2, as Megatron pads it
  EXPECT_THAT(error(5, {"parallel.tp=5"}),
              HasSubstr("[parallel] tp: [model] n_heads 12 is not divisible by [parallel] tp 5"));
  EXPECT_THAT(error(4, {"parallel.tp=4", "model.padded_vocab=50258"}),
              HasSubstr("[model] padded_vocab 50258 is not divisible by [parallel] tp 4"));
  auto pp4 = load(4, {"parallel.pp=4"});
  ASSERT_TRUE(pp4.ok()) << pp4.status();
  EXPECT_EQ(pp4->parallel.pp, 4);
  EXPECT_THAT(error(16, {"parallel.pp=16"}), HasSubstr("12 layers cannot fill 16 chunks"));
  EXPECT_THAT(error(1, {"parallel.virtual_stages=2"}), HasSubstr("need pp >= 2, got pp 1"));
  auto inter = load(4, {"parallel.pp=2", "parallel.virtual_stages=2"});
  ASSERT_TRUE(inter.ok()) << inter.status();
  EXPECT_THAT(error(3, {"parallel.pp=3", "parallel.virtual_stages=2"}),
              HasSubstr("(8 = global_batch 16 / (micro_batch 2 * dp 1)) to be a multiple of pp 3"));
  EXPECT_THAT(error(1, {"parallel.recompute=some"}), HasSubstr("expected none, selective or full"));
  auto rec = load(1, {"parallel.recompute=selective"});
  ASSERT_TRUE(rec.ok()) << rec.status();
  EXPECT_EQ(rec->parallel.recompute, "selective");
}

TEST(ParallelConfigTest, SequenceParallelAndZeroStages) {
  auto sp = load(2, {"parallel.tp=2", "parallel.sequence_parallel=true"});
  ASSERT_TRUE(sp.ok()) << sp.status();
  EXPECT_TRUE(sp->parallel.sequence_parallel);
  for (int stage : {2, 3}) {
    auto z = load(2, {"parallel.zero_stage=" + std::to_string(stage)});
    ASSERT_TRUE(z.ok()) << z.status();
    EXPECT_EQ(z->parallel.zero_stage, stage);
  }
}

TEST(PartitionLayersTest, BalancedAndMegatronTyped) {
  using Chunks = std::vector<std::vector<int64_t>>;
  auto b = parallel::partition_layers(5, 2, "balanced");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(*b, (Chunks{{0, 1, 2}, {3, 4}}));
  auto b4 = parallel::partition_layers(8, 4, "balanced");
  ASSERT_TRUE(b4.ok());
  EXPECT_EQ(*b4, (Chunks{{0, 1}, {2, 3}, {4, 5}, {6, 7}}));
  // Embedding and head count as a layer: 6 layers + 2 = 8 items, 4 per chunk.
  auto t = parallel::partition_layers(6, 2, "type:transformer|embedding");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(*t, (Chunks{{0, 1, 2}, {3, 4, 5}}));
  // 8 layers + 2 = 10 items over 4 chunks: 3, 3, 2, 2 -> the first and last lose one layer.
  auto t4 = parallel::partition_layers(8, 4, "type:transformer|embedding");
  ASSERT_TRUE(t4.ok());
  EXPECT_EQ(*t4, (Chunks{{0, 1}, {2, 3, 4}, {5, 6}, {7}}));
  // 4 layers + 2 over 4 chunks: the last chunk would hold only the head.
  EXPECT_FALSE(parallel::partition_layers(4, 4, "type:transformer|embedding").ok());
  EXPECT_FALSE(parallel::partition_layers(3, 4, "balanced").ok());
}

}  // namespace
}  // namespace anvil::model
