// CPython's random.Random (Modules/_randommodule.c, Lib/random.py), bit-exact, for the draws
// Megatron-DeepSpeed takes from the stdlib module (megatron/utils.py get_prefix_indices:
// random.randint):
//   seeding: Random(n) for an int n >= 0 = MT19937 init_by_array(key), key = n's 32-bit words,
//            least significant first, high zero words dropped (n = 0: key [0]).
//   getrandbits(k), 1 <= k <= 32: one MT19937 output >> (32 - k).
//   randint(a, b) = a + _randbelow(b - a + 1); _randbelow(n): k = n.bit_length(), draw
//            getrandbits(k) until it is < n (Lib/random.py _randbelow_with_getrandbits).
// Verified against python3 by tests/model/prefix_lm_test.cc (fixture from
// scripts/make_prefix_lm_fixture.py, standard library only).
#pragma once

#include <array>
#include <cstdint>

namespace anvil::engine {

class PythonRandom {
 public:
  // random.Random(n) for n = hi * 2^64 + lo.
  explicit PythonRandom(uint64_t lo, uint64_t hi = 0);

  uint32_t next_u32();
  uint32_t getrandbits(int k);  // 1 <= k <= 32 (CHECKed)
  // Uniform in [a, b]; b >= a and b - a < 2^32 - 1 (CHECKed: Python raises on an empty range).
  int64_t randint(int64_t a, int64_t b);

 private:
  static constexpr int kN = 624;
  std::array<uint32_t, kN> mt_{};
  int index_ = kN;
};

}  // namespace anvil::engine
