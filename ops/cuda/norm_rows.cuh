// Pieces shared by the row-resident LayerNorm / RMSNorm kernels (device code, include from .cu):
// the lane -> element layout of a row held in registers, the sizing of the per-block partial
// sums of dgamma (and dbeta) in the caller's workspace, and the kernel that adds those partials
//   dst_k[c] += sum_g part_k[g, c]   (k = 0, 1; g in 0, 1, ... order: deterministic)
// Row layout: one warp per row; lane owns packs p = j 32 + lane (j < kPacks) of V elements,
// i.e. elements [p V, p V + V) when p V < cols (cols % V == 0). The row stays in registers
// between the statistics pass and the write, so every element is read from memory once.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/cuda/vec_io.cuh"

namespace anvil::ops::cuda {

// Packs per lane the row-resident kernels are built for; a row of cols elements takes the
// smallest that holds cols / V packs. Wider rows use the general kernels.
inline int row_packs_per_lane(int64_t cols, int v) {
  const int64_t packs = ceil_div(ceil_div(cols, v), 32);
  if (packs <= 3) return 3;
  if (packs <= 4) return 4;
  if (packs <= 8) return 8;
  return 0;
}

// Calls f(std::integral_constant<int, P>{}) for the row-resident packs per lane P = packs (one of
// row_packs_per_lane's answers).
template <typename F>
void dispatch_packs(int packs, F&& f) {
  switch (packs) {
    case 3:
      f(std::integral_constant<int, 3>{});
      return;
    case 4:
      f(std::integral_constant<int, 4>{});
      return;
    default:
      f(std::integral_constant<int, 8>{});
      return;
  }
}

// Warps (rows in flight) per block of the fused backward: fewer for wide rows, whose per-warp
// shared-memory accumulators are larger.
constexpr int norm_bwd_warps(int packs) { return packs <= 4 ? 8 : 4; }

// Upper bound on the row groups (blocks, partial rows in the workspace) of the fused backward:
// the workspace is sized for it; a launch uses min(this, blocks resident at once).
constexpr int64_t kMaxNormGroups = 1024;
constexpr int64_t kMinRowsPerNormGroup = 8;

inline int64_t norm_group_capacity(int64_t rows) {
  return std::clamp<int64_t>(ceil_div(rows, kMinRowsPerNormGroup), 1, kMaxNormGroups);
}

// Blocks of `kernel` resident at once on the current device (>= 1). The group count, and so the
// summation order of dgamma, depends only on this, the rows and the kernel: bitwise reproducible
// run to run on one kind of GPU.
template <typename Kernel>
int64_t resident_blocks(Kernel kernel, int threads, size_t smem_bytes) {
  int device = 0, sms = 0, per_sm = 0;
  ANVIL_CUDA_CHECK(cudaGetDevice(&device));
  ANVIL_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  ANVIL_CUDA_CHECK(
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, smem_bytes));
  return std::max<int64_t>(1, static_cast<int64_t>(sms) * per_sm);
}

constexpr int kPartialCols = 32;  // reduce kernel: columns per block (one per lane)
constexpr int kPartialRows = 32;  // reduce kernel: warps striding over the groups

// Loads the row at offset o of a (plus the row of b, written back as sum = a + b, with kResidual)
// into the lane's packs v (row layout above). All loads are issued before the first use.
// sum, a, b: [rows, cols] T.
template <typename T, int V, int kPacks, bool kResidual>
__device__ __forceinline__ void load_row(Packed<T, V> (&v)[kPacks], T* sum, const T* a, const T* b,
                                         int64_t o, int64_t cols, int lane) {
  Packed<T, V> w[kPacks];
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
    if (c < cols) {
      v[j] = load_packed<V>(a + o + c);
      if constexpr (kResidual) w[j] = load_packed<V>(b + o + c);
    }
  }
  if constexpr (kResidual) {
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
      if (c < cols) {
#pragma unroll
        for (int k = 0; k < V; ++k) v[j].v[k] = from_f32<T>(to_f32(v[j].v[k]) + to_f32(w[j].v[k]));
        store_packed<V>(sum + o + c, v[j]);
      }
    }
  }
}

// dst0[c] += sum_g part0[g, c]; dst1 likewise when non-null. part0, part1: [groups, cols] f32.
// Thread (tx, ty) of a (kPartialCols, kPartialRows) block sums groups ty, ty + kPartialRows, ...
// of one column; the kPartialRows sums are then added in ty order. static: one copy per .cu.
static __global__ void __launch_bounds__(kPartialCols* kPartialRows)
    norm_reduce_partials_kernel_column_tiles(float* dst0, const float* part0, float* dst1,
                                             const float* part1, int64_t groups, int64_t cols) {
  __shared__ float sh[2][kPartialRows][kPartialCols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kPartialCols + tx;
  float t0 = 0.0f, t1 = 0.0f;
  if (col < cols) {
#pragma unroll 4
    for (int64_t g = ty; g < groups; g += kPartialRows) {
      t0 += part0[g * cols + col];
      if (dst1 != nullptr) t1 += part1[g * cols + col];
    }
  }
  sh[0][ty][tx] = t0;
  sh[1][ty][tx] = t1;
  __syncthreads();
  if (ty < 2 && col < cols && (ty == 0 || dst1 != nullptr)) {
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < kPartialRows; ++k) t += sh[ty][k][tx];
    (ty == 0 ? dst0 : dst1)[col] += t;
  }
}

inline void launch_norm_reduce_partials(float* dst0, const float* part0, float* dst1,
                                        const float* part1, int64_t groups, int64_t cols,
                                        cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(ceil_div(cols, kPartialCols)));
  norm_reduce_partials_kernel_column_tiles<<<grid, dim3(kPartialCols, kPartialRows), 0, stream>>>(
      dst0, part0, dst1, part1, groups, cols);
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
