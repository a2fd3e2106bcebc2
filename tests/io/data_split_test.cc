// split_documents against Megatron's get_train_valid_test_split_ (expected values computed with
// the Python original).
#include "io/data_split.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::io {
namespace {

using Ranges = std::vector<std::pair<int64_t, int64_t>>;

Ranges ranges(int64_t a, int64_t b, int64_t c, int64_t d) { return {{a, b}, {b, c}, {c, d}}; }

TEST(SplitDocuments, MatchesMegatron) {
  // [split, N, Megatron's splits_index] from megatron/data/dataset_utils.py.
  struct Case {
    const char* split;
    int64_t n;
    Ranges want;
  };
  const Case cases[] = {
      {"969,30,1", 1000, ranges(0, 969, 999, 1000)},
      {"969, 30, 1", 10, ranges(0, 10, 10, 10)},
      {"969,30,1", 12345, ranges(0, 11963, 12333, 12345)},
      {"949,50,1", 100, ranges(0, 95, 100, 100)},
      {"1/1/1", 10, ranges(0, 4, 7, 10)},
      {"1,1", 3, ranges(0, 1, 3, 3)},
      {"1,1", 1, ranges(0, 1, 1, 1)},
      {"100", 7, ranges(0, 7, 7, 7)},
      {"98,2", 5, ranges(0, 5, 5, 5)},
      {"1,2,1", 2, ranges(0, 1, 2, 2)},
      {"969,30,1", 0, ranges(0, 0, 0, 0)},
      {"8,1,1", 25, ranges(0, 21, 23, 25)},  // 2.5 rounds to 2 (ties to even, as Python)
  };
  for (const Case& c : cases) {
    auto got = split_documents(c.split, c.n);
    ASSERT_TRUE(got.ok()) << c.split << ": " << got.status();
    EXPECT_EQ(*got, c.want) << c.split << " N=" << c.n;
  }
}

TEST(SplitDocuments, ClampsWhereMegatronGoesNegative) {
  // Megatron yields [0, -1, 1, 3] here; we keep the boundaries inside [0, N].
  auto got = split_documents("0,1,1", 3);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(*got, ranges(0, 0, 1, 3));
}

TEST(SplitDocuments, RejectsBadStrings) {
  for (const char* bad : {"", "a,b", "1,2,3,4", "0,0,0", "-1,2", "1,,2", "nan"}) {
    EXPECT_EQ(split_documents(bad, 10).status().code(), absl::StatusCode::kInvalidArgument)
        << '"' << bad << '"';
  }
  EXPECT_FALSE(split_documents("1", -1).ok());
}

}  // namespace
}  // namespace anvil::io
