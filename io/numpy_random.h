// numpy's legacy np.random.RandomState(seed), bit-exact, for the parts Megatron's dataset index
// uses (megatron/data/gpt_dataset.py shuffles doc_idx and shuffle_idx with it):
//   seeding: RandomState(int seed) = MT19937 init_genrand(seed) (numpy's mt19937_seed; the
//            standard's std::mt19937(seed) is the same recurrence), seed in [0, 2^32).
//   next_u32: one MT19937 output. next_u64 = (first << 32) | second output.
//   random_interval(max): uniform in [0, max] by masked rejection: draw (32-bit draws when
//            max <= 0xffffffff, else 64-bit), AND with the smallest all-ones mask >= max,
//            retry while the value exceeds max (numpy/random/src/distributions: random_interval).
//   shuffle: for i = n-1 down to 1: swap(a[i], a[random_interval(i)]) (mtrand.pyx _shuffle_raw,
//            the 1-d ndarray path).
// Verified against numpy by tests/io/numpy_random_test.cc (fixtures from
// scripts/make_gpt_index_fixture.py under Debian's /usr/bin/python3 + python3-numpy).
#pragma once

#include <cstdint>
#include <random>
#include <utility>

namespace anvil::io {

class NumpyRandomState {
 public:
  explicit NumpyRandomState(uint32_t seed) : mt_(seed) {}

  uint32_t next_u32() { return static_cast<uint32_t>(mt_()); }
  uint64_t next_u64() {
    const uint64_t hi = next_u32();  // numpy draws the high half first
    return (hi << 32) | next_u32();
  }
  uint64_t random_interval(uint64_t max);

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
