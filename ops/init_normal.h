// Deterministic parameter initialization written straight into its target (a whole parameter, a
// tensor-parallel shard of it, or a piece of either), numbered by the whole parameter's elements:
//   kNormal    dst[j] = (float)(sigma * N(seed, offset + w))  if w < valid, else 0   (=)
//   kConstant  dst[j] = value                                                        (=)
// with w = tp_whole_index(tp, first + j), the whole-parameter element of the shard's local
// element first + j. In double precision, from Philox4x32-10 words (w0, w1) of counter
// (c mod 2^32, c div 2^32, "INIT", 0) and key seed:
//   N(seed, c) = sqrt(-2 ln u1) cos(2 pi u2),   u1 = (w0 + 1) / 2^32 in (0, 1],  u2 = w1 / 2^32.
// The f32 value is then stored in dst's dtype (bf16/f16: round to nearest even from f32).
//
// CPU and GPU: the CPU twin is the reference (glibc log/cos). The CUDA twin evaluates the same
// double expression, but CUDA's double log and cos may differ from glibc's by an ulp or two of
// double, so after the rounding to f32 a rare element can differ by 1 f32 ulp (measured by
// tests/ops/init_normal_test.cc: InitNormalGpu.*; a stored bf16 then differs by at most 1 bf16
// ulp). Everything else (Philox, the uniforms, sqrt, the products) is exact or correctly
// rounded on both.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "engine/philox.h"
#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::Stream;
using engine::TensorView;

// Megatron tensor parallelism: a [rows, cols] shard (a vector: cols = 1) of a parameter whose
// dimension split_dim is `parts` blocks (c_attn: q | k | v), each split evenly over tp ranks;
// rank tp_rank holds the tp_rank-th piece of every block, in block order. split_dim -1: whole.
struct TpSplit {
  int64_t rows = 1, cols = 1;  // the shard's shape
  int split_dim = -1;
  int parts = 1, tp = 1, tp_rank = 0;
};

// The whole-parameter element index of the shard's element `local` (row-major).
ANVIL_HOST_DEVICE int64_t tp_whole_index(const TpSplit& s, int64_t local) {
  if (s.split_dim < 0 || s.tp == 1) return local;
  int64_t row = local / s.cols, col = local % s.cols;
  if (s.split_dim == 0) {
    const int64_t piece = s.rows / s.parts;  // rows of one block on one rank
    row = row / piece * piece * s.tp + s.tp_rank * piece + row % piece;
    return row * s.cols + col;
  }
  const int64_t piece = s.cols / s.parts;
  col = col / piece * piece * s.tp + s.tp_rank * piece + col % piece;
  return row * s.cols * s.tp + col;
}

// Philox word 2 of the counter tags the init stream, so it never coincides with dropout's
// (seed, offset) stream, whose counters have words 2 and 3 zero.
inline constexpr uint32_t kInitStreamTag = 0x494e4954u;  // "INIT"

// N(seed, counter) above: a standard normal sample, in double.
ANVIL_HOST_DEVICE double init_normal_sample(uint64_t seed, uint64_t counter) {
  const engine::Philox4 r = engine::philox4x32_10(
      static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), kInitStreamTag, 0u,
      static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
  constexpr double kTwoPi = 6.283185307179586476925;
  const double u1 = (static_cast<double>(r.v[0]) + 1.0) / 4294967296.0;  // (0, 1]: log finite
  const double u2 = static_cast<double>(r.v[1]) / 4294967296.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

enum class InitKind { kNormal, kConstant };

struct InitNormalArgs {
  InitKind kind = InitKind::kNormal;
  float value = 0.0f;  // kConstant
  double sigma = 0.0;  // kNormal: standard deviation
  uint64_t seed = 0;
  uint64_t offset = 0;  // Philox counter of whole-parameter element 0
  int64_t valid = std::numeric_limits<int64_t>::max();  // whole elements >= valid are 0
  int64_t first = 0;  // the shard's local element that dst[0] holds
  TpSplit tp;
};

// dst: [n] contiguous (any shape), f32/bf16/f16 (also f64 on the CPU), on the stream's device;
// shard elements [first, first + n) must lie within tp.rows * tp.cols. Nothing is synchronized.
void init_normal(const InitNormalArgs& args, TensorView dst, Stream& stream);

// Same-signature twins. The public function checks arguments and dispatches on stream.is_cuda().
namespace cpu {
void init_normal(const InitNormalArgs& args, TensorView dst, Stream& stream);
}  // namespace cpu
namespace cuda {
void init_normal(const InitNormalArgs& args, TensorView dst, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
