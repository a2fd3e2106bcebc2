// CPython's random.Random (see python_random.h): MT19937 as in Modules/_randommodule.c
// (init_genrand, init_by_array, genrand_uint32) and Lib/random.py's randint.
#include "engine/python_random.h"

#include <string>
#include <vector>

#include "engine/status.h"

namespace anvil::engine {
namespace {

constexpr uint32_t kUpperMask = 0x80000000u, kLowerMask = 0x7fffffffu, kMatrixA = 0x9908b0dfu;

}  // namespace

PythonRandom::PythonRandom(uint64_t lo, uint64_t hi) {
  // Python's key: the 32-bit words of n, least significant first, without high zero words.
  std::vector<uint32_t> key = {static_cast<uint32_t>(lo), static_cast<uint32_t>(lo >> 32),
                               static_cast<uint32_t>(hi), static_cast<uint32_t>(hi >> 32)};
  while (key.size() > 1 && key.back() == 0) key.pop_back();
  // init_genrand(19650218)
  mt_[0] = 19650218u;
  for (int i = 1; i < kN; ++i) {
    mt_[i] = 1812433253u * (mt_[i - 1] ^ (mt_[i - 1] >> 30)) + static_cast<uint32_t>(i);
  }
  // init_by_array(key)
  const int len = static_cast<int>(key.size());
  int i = 1, j = 0;
  for (int k = kN > len ? kN : len; k > 0; --k) {
    mt_[i] = (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1664525u)) + key[j] +
             static_cast<uint32_t>(j);
    ++i, ++j;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
    if (j >= len) j = 0;
  }
  for (int k = kN - 1; k > 0; --k) {
    mt_[i] =
        (mt_[i] ^ ((mt_[i - 1] ^ (mt_[i - 1] >> 30)) * 1566083941u)) - static_cast<uint32_t>(i);
    ++i;
    if (i >= kN) {
      mt_[0] = mt_[kN - 1];
      i = 1;
    }
  }
  mt_[0] = 0x80000000u;  // non-zero initial array
  index_ = kN;
}

uint32_t PythonRandom::next_u32() {
  if (index_ >= kN) {  // generate kN words at once
    for (int k = 0; k < kN; ++k) {
      const uint32_t y = (mt_[k] & kUpperMask) | (mt_[(k + 1) % kN] & kLowerMask);
      mt_[k] = mt_[(k + 397) % kN] ^ (y >> 1) ^ ((y & 1u) != 0 ? kMatrixA : 0u);
    }
    index_ = 0;
  }
  uint32_t y = mt_[index_++];
  y ^= y >> 11;
  y ^= (y << 7) & 0x9d2c5680u;
  y ^= (y << 15) & 0xefc60000u;
  y ^= y >> 18;
  return y;
}

uint32_t PythonRandom::getrandbits(int k) {
  ANVIL_CHECK_MSG(k >= 1 && k <= 32,
                  "PythonRandom::getrandbits: k must be in [1, 32], got " + std::to_string(k));
  return next_u32() >> (32 - k);
}

int64_t PythonRandom::randint(int64_t a, int64_t b) {
  ANVIL_CHECK_MSG(b >= a && b - a < 0xffffffffLL,
                  "PythonRandom::randint: need a <= b < a + 2^32 - 1, got [" + std::to_string(a) +
                      ", " + std::to_string(b) + "] (Python raises on an empty range)");
  const uint64_t n = static_cast<uint64_t>(b - a) + 1;
  int k = 0;
  while ((n >> k) != 0) ++k;  // n.bit_length()
  uint64_t r = getrandbits(k);
  while (r >= n) r = getrandbits(k);
  return a + static_cast<int64_t>(r);
}

}  // namespace anvil::engine
