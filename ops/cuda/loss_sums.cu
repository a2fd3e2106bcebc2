// CUDA twin of the loss sums (math in ops/loss_sums.h): one block; each thread sums a strided
// part of x (then y) in double, CUB reduces the block in a fixed order, thread 0 adds the
// weighted total to out. A step's losses are a few ten thousand floats: one block is enough.
#include <cub/block/block_reduce.cuh>

#include "engine/cuda_check.h"
#include "ops/loss_sums.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 512;

struct Scales {
  double y_weight;
  double s[kMaxLossSums];
};

// out: [k] f64 (+=); x: [n] f32; y: [m] f32 or null.
__global__ void __launch_bounds__(kThreads)
    add_loss_sums_kernel(double* __restrict__ out, int k, const float* __restrict__ x, int64_t n,
                         const float* __restrict__ y, int64_t m, Scales sc) {
  using BlockReduce = cub::BlockReduce<double, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  double ax = 0.0;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) ax += static_cast<double>(x[i]);
  const double sx = BlockReduce(temp).Sum(ax);
  __syncthreads();  // temp is reused
  double ay = 0.0;
  for (int64_t i = threadIdx.x; i < m; i += kThreads) ay += static_cast<double>(y[i]);
  const double sy = BlockReduce(temp).Sum(ay);
  if (threadIdx.x != 0) return;
  const double s = m > 0 ? sx + sy * sc.y_weight : sx;
  for (int j = 0; j < k; ++j) {
    if (sc.s[j] != 0.0) out[j] += s * sc.s[j];
  }
}

}  // namespace

void add_loss_sums(const LossSumArgs& args, TensorView out, ConstTensorView x, ConstTensorView y,
                   Stream& stream) {
  Scales sc{args.y_weight, {}};
  for (int j = 0; j < kMaxLossSums; ++j) sc.s[j] = args.scales[static_cast<size_t>(j)];
  add_loss_sums_kernel<<<1, kThreads, 0, stream.cuda_stream()>>>(
      out.as<double>(), static_cast<int>(out.numel()), x.as<float>(), x.numel(),
      y.empty() ? nullptr : y.as<float>(), y.empty() ? 0 : y.numel(), sc);
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
