// numpy's legacy RandomState draws and pairwise sum (see numpy_random.h).
#include "io/numpy_random.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "engine/status.h"

namespace anvil::io {

double numpy_pairwise_sum(const double* a, int64_t n) {
  if (n < 8) {
    double res = 0.0;
    for (int64_t i = 0; i < n; ++i) res += a[i];
    return res;
  }
  if (n <= 128) {
    double r[8];
    for (int k = 0; k < 8; ++k) r[k] = a[k];
    int64_t i = 8;
    for (; i < n - (n % 8); i += 8) {
      for (int k = 0; k < 8; ++k) r[k] += a[i + k];
    }
    double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
    for (; i < n; ++i) res += a[i];
    return res;
  }
  int64_t n2 = n / 2;
  n2 -= n2 % 8;
  return numpy_pairwise_sum(a, n2) + numpy_pairwise_sum(a + n2, n - n2);
}

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

int64_t NumpyRandomState::randint(int64_t low, int64_t high) {
  ANVIL_CHECK(high > low);
  return low + static_cast<int64_t>(random_interval(static_cast<uint64_t>(high - 1 - low)));
}

int64_t NumpyRandomState::choice(const double* p, int64_t k) {
  ANVIL_CHECK(k > 0);
  const double sum = numpy_pairwise_sum(p, k);
  std::vector<double> cdf(static_cast<size_t>(k));
  double acc = 0.0;
  for (int64_t i = 0; i < k; ++i) {
    acc += p[i] / sum;
    cdf[i] = acc;
  }
  const double last = cdf[k - 1];
  for (double& c : cdf) c /= last;
  const double u = random_sample();
  return std::upper_bound(cdf.begin(), cdf.end(), u) - cdf.begin();
}

int64_t NumpyRandomState::geometric(double p) {
  ANVIL_CHECK(p > 0.0 && p < 1.0 / 3.0);
  return static_cast<int64_t>(std::ceil(std::log1p(-random_sample()) / std::log(1.0 - p)));
}

}  // namespace anvil::io
