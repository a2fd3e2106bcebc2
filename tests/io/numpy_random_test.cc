// NumpyRandomState vs numpy's legacy RandomState (expected values from Debian's numpy 1.24 via
// scripts/make_gpt_index_fixture.py): consecutive shuffles of arange(n) on one generator for
// several seeds and n (mask boundaries included), and 64-bit bounded draws; the uniform, randint,
// geometric and choice draws of Megatron's BERT/T5 samples (scripts/make_bert_t5_fixture.py).
#include "io/numpy_random.h"

#include <cstdint>
#include <cstring>
#include <numeric>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/io/bert_t5_fixture.h"
#include "tests/io/gpt_index_fixture.h"

namespace anvil::io {
namespace {

using testing::gpt_cases;
using testing::load_expected;

TEST(NumpyRandom, RawStreamIsMt19937InitGenrand) {
  // np.random.RandomState(7).randint(0, 2**32, size=4, dtype=np.uint64): one output each.
  NumpyRandomState r(7);
  EXPECT_EQ(r.next_u32(), 327741615u);
  EXPECT_EQ(r.next_u32(), 976413892u);
  EXPECT_EQ(r.next_u32(), 3349725721u);
  EXPECT_EQ(r.next_u32(), 1369975286u);
}

TEST(NumpyRandom, ShufflesMatchNumpy) {
  for (const auto& c : gpt_cases("shuffles")) {
    const uint32_t seed = static_cast<uint32_t>(std::stoull(c[1]));
    const NpyArray want = load_expected("numpy_shuffles_" + c[1] + ".npy");
    NumpyRandomState rng(seed);
    int64_t at = 0;
    for (size_t k = 2; k < c.size(); ++k) {
      const int64_t n = std::stoll(c[k]);
      std::vector<int64_t> a(n);
      std::iota(a.begin(), a.end(), 0);
      rng.shuffle(a.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        ASSERT_EQ(a[i], want[at + i]) << "seed " << seed << " n " << n << " element " << i;
      }
      at += n;
    }
    EXPECT_EQ(at, want.size());
  }
}

TEST(NumpyRandom, ShuffleDoesNotDependOnElementType) {
  // Megatron shuffles int32 doc_idx and uint32/int64 shuffle_idx: same permutation.
  std::vector<int32_t> a(1000);
  std::vector<int64_t> b(1000);
  std::iota(a.begin(), a.end(), 0);
  std::iota(b.begin(), b.end(), 0);
  NumpyRandomState ra(3), rb(3);
  ra.shuffle(a.data(), 1000);
  rb.shuffle(b.data(), 1000);
  for (int i = 0; i < 1000; ++i) ASSERT_EQ(a[i], b[i]);
}

TEST(NumpyRandom, SixtyFourBitIntervalsMatchNumpy) {
  for (const auto& c : gpt_cases("interval")) {
    const uint32_t seed = static_cast<uint32_t>(std::stoull(c[1]));
    const uint64_t max = std::stoull(c[2]);
    const int64_t count = std::stoll(c[3]);
    const NpyArray want = load_expected("numpy_interval_" + c[1] + "_" + c[2] + ".npy");
    ASSERT_EQ(want.size(), count);
    NumpyRandomState rng(seed);
    for (int64_t i = 0; i < count; ++i) {
      ASSERT_EQ(rng.random_interval(max), static_cast<uint64_t>(want[i]))
          << "seed " << seed << " max " << max << " draw " << i;
    }
  }
}

TEST(NumpyRandom, IntervalZeroDrawsNothing) {
  NumpyRandomState a(11), b(11);
  EXPECT_EQ(a.random_interval(0), 0u);
  EXPECT_EQ(a.next_u32(), b.next_u32());
}

}  // namespace
}  // namespace anvil::io

namespace anvil::io {
namespace {

// The draws behind Megatron's BERT/T5 samples, against numpy (scripts/make_bert_t5_fixture.py).
TEST(NumpyRandom, RandomSampleMatchesNumpy) {
  const NpyArray want = testing::bert_t5_array("numpy_random_sample");  // float64 as bits
  ASSERT_EQ(want.dtype(), NpyDType::kU64);
  NumpyRandomState r(3);
  for (int64_t i = 0; i < want.size(); ++i) {
    const double got = r.random_sample();
    uint64_t bits;
    std::memcpy(&bits, &got, sizeof(bits));
    ASSERT_EQ(bits, static_cast<uint64_t>(want[i])) << "draw " << i;
  }
}

TEST(NumpyRandom, RandintMatchesNumpy) {
  const NpyArray want = testing::bert_t5_array("numpy_randint");
  NumpyRandomState r(4);
  for (int64_t k = 0; k < want.size(); ++k) {
    ASSERT_EQ(r.randint(1, 2 + k % 37), want[k]) << "draw " << k;
  }
}

TEST(NumpyRandom, GeometricMatchesNumpy) {
  const NpyArray want = testing::bert_t5_array("numpy_geometric");
  NumpyRandomState r(5);
  int64_t sum = 0;
  for (int64_t i = 0; i < want.size(); ++i) {
    const int64_t g = r.geometric(0.2);
    ASSERT_EQ(g, want[i]) << "draw " << i;
    sum += g;
  }
  EXPECT_NEAR(static_cast<double>(sum) / want.size(), 5.0, 0.3);  // mean 1/p
}

TEST(NumpyRandom, ChoiceMatchesNumpy) {
  const NpyArray want = testing::bert_t5_array("numpy_choice3");
  // Megatron's pvals: 1/n normalized, then renormalized by choice's caller.
  std::vector<double> p = {1.0, 1.0 / 2, 1.0 / 3};
  const double sum = numpy_pairwise_sum(p.data(), 3);
  for (double& v : p) v /= sum;
  NumpyRandomState r(6);
  for (int64_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(1 + r.choice(p.data(), 3), want[i]) << "draw " << i;
  }
}

}  // namespace
}  // namespace anvil::io
