// [data] last_epoch_cutoff: _build_index_mappings separates the last epoch when it contributes
// fewer than int(cutoff * samples per epoch) samples (BigScience fork 0.95, NVIDIA 0.80). Four
// sequences of 10 tokens, seq_len 4: 9 samples per epoch; 16 samples need 2 epochs, the last
// contributing 16 - 9 = 7: 7 < int(0.95 * 9) = 8 separates it, 7 < int(0.80 * 9) = 7 does not.
// The cache names carry a cutoff other than the fork's.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/gpt_dataset.h"

namespace anvil::io {
namespace {

const std::vector<int32_t> kSizes = {10, 10, 10, 10};

TEST(GptIndexCutoffTest, CutoffDecidesTheSeparateLastEpoch) {
  auto fork = build_gpt_index(kSizes, 0, 4, 16, 4, 1234, 0.95);
  auto nvidia = build_gpt_index(kSizes, 0, 4, 16, 4, 1234, 0.80);
  ASSERT_TRUE(fork.ok() && nvidia.ok());
  EXPECT_EQ(fork->num_epochs, 2);
  EXPECT_TRUE(fork->separate_last_epoch);
  EXPECT_FALSE(nvidia->separate_last_epoch);
  // The default is the fork's.
  EXPECT_TRUE(build_gpt_index(kSizes, 0, 4, 16, 4, 1234)->separate_last_epoch);
  // 15 samples: 6 in the last epoch, below both cutoffs.
  EXPECT_TRUE(build_gpt_index(kSizes, 0, 4, 15, 4, 1234, 0.80)->separate_last_epoch);
  EXPECT_FALSE(build_gpt_index(kSizes, 0, 4, 16, 4, 1234, 0.0).ok());
  EXPECT_FALSE(build_gpt_index(kSizes, 0, 4, 16, 4, 1234, 1.5).ok());
}

TEST(GptIndexCutoffTest, CacheNameHoldsANonDefaultCutoff) {
  GptDatasetOptions opt;
  opt.num_samples = 16;
  opt.seq_len = 4;
  EXPECT_EQ(gpt_index_file_prefix("/d/x", opt), "/d/x_train_indexmap_16ns_4sl_1234s");
  opt.last_epoch_cutoff = 0.8;
  EXPECT_EQ(gpt_index_file_prefix("/d/x", opt), "/d/x_train_indexmap_16ns_4sl_1234s_0.8lec");
}

}  // namespace
}  // namespace anvil::io
