// CUDA squared L2 norm:  out[0] += sum_i x_i^2   (+=, f32 in, f32 out)
// Two kernels, deterministic and atomic-free: (1) a grid-stride pass where each thread sums
// squares in f32, each block reduces with CUB and writes its partial to the workspace;
// (2) one block sums the partials in a fixed order and adds the total into out. The block count
// depends on n only, so a given (n, alignment of x) always reduces in the same order.
// NaN/inf propagate through the sums.
#include <algorithm>
#include <cstdint>
#include <cub/block/block_reduce.cuh>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/grad_norm.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kVec = 4;               // float4 loads
constexpr int64_t kMaxBlocks = 1024;  // ~1 wave of 256-thread blocks on an H200
constexpr int kFinishThreads = 1024;  // >= kMaxBlocks: one partial per thread at most
static_assert(kFinishThreads >= kMaxBlocks, "finish kernel reads each partial once");

int64_t partial_blocks(int64_t n) {
  if (n <= 0) return 0;
  const int64_t per_block = static_cast<int64_t>(kThreads) * kVec;
  return std::min<int64_t>((n + per_block - 1) / per_block, kMaxBlocks);
}

// partials: [gridDim.x] f32 (=); x: [n] f32. kVec4: x is 16-byte aligned; the n % 4 tail is
// read with scalar loads.
template <bool kVec4>
__global__ void __launch_bounds__(kThreads)
    sum_squares_partials_grid_stride(float* __restrict__ partials, const float* __restrict__ x,
                                     int64_t n) {
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  float acc = 0.0f;
  int64_t scalar_begin = 0;
  if constexpr (kVec4) {
    const int64_t n4 = n / 4;
    for (int64_t i = tid; i < n4; i += stride) {
      const float4 a = reinterpret_cast<const float4*>(x)[i];
      acc += a.x * a.x + a.y * a.y + a.z * a.z + a.w * a.w;
    }
    scalar_begin = n4 * 4;
  }
  for (int64_t i = scalar_begin + tid; i < n; i += stride) acc += x[i] * x[i];

  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const float block_sum = BlockReduce(temp).Sum(acc);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sum;
}

// out: [1] f32 (+=); partials: [num_partials] f32. A single block.
__global__ void __launch_bounds__(kFinishThreads)
    sum_squares_finish_single_block(float* __restrict__ out, const float* __restrict__ partials,
                                    int num_partials) {
  float acc = threadIdx.x < num_partials ? partials[threadIdx.x] : 0.0f;
  using BlockReduce = cub::BlockReduce<float, kFinishThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const float total = BlockReduce(temp).Sum(acc);
  if (threadIdx.x == 0) out[0] += total;
}

}  // namespace

size_t sum_squares_workspace_bytes(int64_t n) {
  return static_cast<size_t>(partial_blocks(n)) * sizeof(float);
}

void sum_squares(TensorView out, ConstTensorView x, Workspace ws, Stream& stream) {
  const int64_t n = x.numel();
  const int64_t blocks = partial_blocks(n);
  if (blocks == 0) return;  // out += 0
  ANVIL_CHECK_MSG(ws.data != nullptr && ws.bytes >= static_cast<size_t>(blocks) * sizeof(float),
                  "sum_squares (cuda): workspace too small");
  float* partials = static_cast<float*>(ws.data);
  const float* xp = x.as<float>();
  cudaStream_t s = stream.cuda_stream();
  if (reinterpret_cast<uintptr_t>(xp) % 16 == 0) {
    sum_squares_partials_grid_stride<true>
        <<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(partials, xp, n);
  } else {
    sum_squares_partials_grid_stride<false>
        <<<static_cast<unsigned>(blocks), kThreads, 0, s>>>(partials, xp, n);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
  sum_squares_finish_single_block<<<1, kFinishThreads, 0, s>>>(out.as<float>(), partials,
                                                               static_cast<int>(blocks));
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
