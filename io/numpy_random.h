// numpy's legacy np.random.RandomState(seed), bit-exact, for the parts Megatron's dataset index
// uses (megatron/data/gpt_dataset.py shuffles doc_idx and shuffle_idx with it):
//   seeding: RandomState(int seed) = MT19937 init_genrand(seed) (numpy's mt19937_seed; the
//            standard's std::mt19937(seed) is the same recurrence), seed in [0, 2^32).
//   next_u32: one MT19937 output. next_u64 = (first << 32) | second output.
//   random_interval(max): uniform in [0, max] by masked rejection: draw (32-bit draws when
//            max <= 0xffffffff, else 64-bit), AND with the smallest all-ones mask >= max,
//            retry while the value exceeds max (numpy/random/src/distributions: random_interval).
//   shuffle: for i = n-1 down to 1: swap(a[i], a[random_interval(i)]) (mtrand.pyx _shuffle_raw,
//            the 1-d ndarray path; a Python list takes the same swaps).
// and the draws of Megatron's BERT/T5 samples (dataset_utils.create_masked_lm_predictions):
//   random_sample: ((a >> 5) * 2^26 + (b >> 6)) / 2^53 of two outputs a, b (mt19937_next_double).
//   randint(low, high): low + random_interval(high - 1 - low), the legacy masked int64 path.
//   choice(k, p / p.sum()): cdf = cumsum(p / sum(p)) / its last entry, index = the first cdf
//            entry above one random_sample (searchsorted side='right').
//   geometric(p), p < 1/3: ceil(log1p(-U) / log(1 - p)), U = random_sample() (legacy inversion).
// Verified against numpy by tests/io/numpy_random_test.cc (fixtures from
// scripts/make_gpt_index_fixture.py under Debian's /usr/bin/python3 + python3-numpy).
#pragma once

#include <cstdint>
#include <random>
#include <utility>

namespace anvil::io {

// numpy's np.sum of a float64 array (pairwise summation), bit-exact.
double numpy_pairwise_sum(const double* a, int64_t n);

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t next_u32() { return static_cast<uint32_t>(mt_()); }
  uint64_t next_u64() {
    const uint64_t hi = next_u32();  // numpy draws the high half first
    return (hi << 32) | next_u32();
  }
  uint64_t random_interval(uint64_t max);
  double random_sample() {
    const uint32_t a = next_u32() >> 5;
    const uint32_t b = next_u32() >> 6;
    return (a * 67108864.0 + b) / 9007199254740992.0;
  }
  // Uniform in [low, high); high > low (CHECKed).
  int64_t randint(int64_t low, int64_t high);
  // Index drawn as RandomState.choice(k, p=p[:k] / p[:k].sum()) draws it; k >= 1 (CHECKed).
  int64_t choice(const double* p, int64_t k);
  // Trials up to the first success, p in (0, 1/3) (CHECKed: numpy's search branch is not here).
  int64_t geometric(double p);

  // In-place shuffle of a[0..n), as RandomState.shuffle on a 1-d array of n elements.
  template <typename T>
  void shuffle(T* a, int64_t n) {
    for (int64_t i = n - 1; i > 0; --i) {
      const int64_t j = static_cast<int64_t>(random_interval(static_cast<uint64_t>(i)));
      std::swap(a[i], a[j]);
    }
  }

 private:
  std::mt19937 mt_;
};

}  // namespace anvil::io
