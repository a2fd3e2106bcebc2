// configs/tr11_bloom_176b.ini parses at the layout BigScience ran tr11 with (384 ranks = TP 4 x
// PP 12 x DP 8) and has BLOOM-176B's size: 176.2e9 parameters (14336 hidden, 70 layers, the
// 250880-row tied embedding, ALiBi, embedding LayerNorm).
#include "gtest/gtest.h"
#include "model/train/train_config.h"

namespace anvil::model {
namespace {

TEST(Tr11ConfigTest, ParsesAtTp4Pp12Dp8WithBloom176bShape) {
  auto t = load_train_config("configs/tr11_bloom_176b.ini", {}, nullptr, 384);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->parallel.tp, 4);
  EXPECT_EQ(t->parallel.pp, 12);
  EXPECT_EQ(t->parallel.dp, 8);
  // The HF model card's 176,247,271,424 parameters.
  EXPECT_EQ(t->model.total_params(), 176247271424);
  EXPECT_FALSE(load_train_config("configs/tr11_bloom_176b.ini", {}, nullptr, 8).ok());
}

}  // namespace
}  // namespace anvil::model
