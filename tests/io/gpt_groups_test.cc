// GptCorpus::build_fraction_ranges, a named group of --{train,valid,test}-weighted-split-paths:
// source k covers sequences [round(a * n), round(b * n)) with Python's round (ties to even), as
// Megatron's get_split_by_range_; the group's name names the index; bad ranges are refused.
// synth_a holds 120 sequences: 1/16 * 120 = 7.5 -> 8, 11/16 * 120 = 82.5 -> 82.
#include <algorithm>
#include <string>

#include "gtest/gtest.h"
#include "io/blended_dataset.h"
#include "tests/io/gpt_index_fixture.h"

namespace anvil::io {
namespace {

TEST(GptGroupsTest, FractionRangesRoundHalfToEven) {
  const std::string a = testing::gpt_fixture_dir() + "/synth_a";
  auto corpus = GptCorpus::open({{1.0, a}}, false, "1");
  ASSERT_TRUE(corpus.ok()) << corpus.status();
  ASSERT_EQ(corpus->data(0).num_sequences(), 120);
  GptDatasetOptions opt;
  opt.name = "GROUP";
  opt.seq_len = 16;
  opt.use_cache = false;
  auto s = corpus->build_fraction_ranges({{1.0 / 16, 11.0 / 16}}, 10, opt);
  ASSERT_TRUE(s.ok()) << s.status();
  const GptIndex& ix = (*s)->datasets()[0]->index();
  int64_t lo = 1 << 30, hi = -1;
  for (int64_t i = 0; i < ix.doc_idx.size(); ++i) {
    const int64_t d = ix.doc_idx[i];
    lo = std::min(lo, d);
    hi = std::max(hi, d);
  }
  EXPECT_EQ(lo, 8);
  EXPECT_EQ(hi, 81);
  EXPECT_FALSE(corpus->build_fraction_ranges({{0.5, 0.5}}, 10, opt).ok());
  EXPECT_FALSE(corpus->build_fraction_ranges({{0.0, 0.5}, {0.5, 1.0}}, 10, opt).ok());
}

}  // namespace
}  // namespace anvil::io
