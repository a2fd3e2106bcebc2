// numpy's legacy RandomState bounded draw (see numpy_random.h).
#include "io/numpy_random.h"

namespace anvil::io {

uint64_t NumpyRandomState::random_interval(uint64_t max) {
  if (max == 0) return 0;
  // Smallest bit mask >= max.
  uint64_t mask = max;
  mask |= mask >> 1;
  mask |= mask >> 2;
  mask |= mask >> 4;
  mask |= mask >> 8;
  mask |= mask >> 16;
  mask |= mask >> 32;
  uint64_t value;
  if (max <= 0xffffffffULL) {
    while ((value = (next_u32() & mask)) > max) {
    }
  } else {
    while ((value = (next_u64() & mask)) > max) {
    }
  }
  return value;
}

}  // namespace anvil::io
