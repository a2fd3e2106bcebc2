// CUDA LayerNorm over the last dim, optionally fused with the residual add before it:
//   forward : y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps)   (= y, mean, rstd)
//   residual: sum = a + b rounded to T (=), then y = layernorm(sum)  (the rounded sum, as the
//             CPU twin does)
//   backward, with xhat = (x - mean) * rstd and g = dy * gamma:
//     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (= or += per Accumulate)
//     dgamma += sum_rows dy * xhat;  dbeta += sum_rows dy   (f32)
// Two paths, f32 statistics in both (two-pass variance):
// - row-resident (16-byte aligned, cols % V == 0, cols <= 256 V; every GPT width): one warp per
//   row holding the row in registers (norm_rows.cuh), so each input is read once. The backward
//   is one kernel: dx, plus per-warp dgamma/dbeta column sums in shared memory, added per block
//   in warp order into one f32 partial per (block, column) in the workspace.
// - general (anything else): one warp per row re-reading the row from L1/L2 per pass; dgamma/
//   dbeta partials from a second, column-tiled kernel over fixed row groups.
// Either way a last kernel adds the partials of each column in group order into dgamma/dbeta.
// No atomics: deterministic (the row-resident group count follows the GPU's resident blocks,
// so the bits are reproducible run to run on one kind of GPU).
#include <algorithm>
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/workspace.h"
#include "ops/cuda/norm_rows.cuh"
#include "ops/cuda/vec_io.cuh"
#include "ops/layernorm.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;         // rows per block in the warp-per-row kernels
constexpr int kTileCols = 32;             // partial-sum kernel: columns per block (one per lane)
constexpr int kTileRows = 8;              // partial-sum kernel: warps stepping through the rows
constexpr int64_t kMaxGroups = 128;       // row groups (partials per column)
constexpr int64_t kMinRowsPerGroup = 32;  // fewer rows than this per group is not worth it

int64_t num_groups(int64_t rows) {
  return std::clamp<int64_t>(ceil_div(rows, kMinRowsPerGroup), 1, kMaxGroups);
}

// One warp per row. kResidual: src = sum = round(a + b) (written here, then re-read by the same
// lane, which wrote exactly those elements); else src = a = x and sum/b are unused.
// sum, y, a, b: [rows, cols] T; mean, rstd: [rows] f32; gamma, beta: [cols] T.
// The lane owns elements [c, c + V) for c = lane V, lane V + 32 V, ... (cols % V == 0).
template <typename T, int V, bool kResidual>
__global__ void layernorm_fwd_kernel_warp_per_row(T* sum, T* y, float* mean, float* rstd,
                                                  const T* a, const T* b, const T* gamma,
                                                  const T* beta, int64_t rows, int64_t cols,
                                                  float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: shuffles below stay full-warp
  const int64_t o = row * cols;
  const T* src = kResidual ? sum + o : a + o;

  float s = 0.0f;
  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    Packed<T, V> v = load_packed<V>(a + o + c);
    if constexpr (kResidual) {
      const Packed<T, V> w = load_packed<V>(b + o + c);
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = from_f32<T>(to_f32(v.v[k]) + to_f32(w.v[k]));
      store_packed<V>(sum + o + c, v);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) s += to_f32(v.v[k]);
  }
  const float m = warp_sum(s) / static_cast<float>(cols);

  float ss = 0.0f;
  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    const Packed<T, V> v = load_packed<V>(src + c);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float d = to_f32(v.v[k]) - m;
      ss += d * d;
    }
  }
  const float rs = rsqrtf(warp_sum(ss) / static_cast<float>(cols) + eps);

  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    const Packed<T, V> v = load_packed<V>(src + c);
    const Packed<T, V> g = load_packed<V>(gamma + c);
    const Packed<T, V> bb = load_packed<V>(beta + c);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      out.v[k] = from_f32<T>((to_f32(v.v[k]) - m) * rs * to_f32(g.v[k]) + to_f32(bb.v[k]));
    }
    store_packed<V>(y + o + c, out);
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

// dx for one row per warp. dx, dy, x: [rows, cols] T; gamma: [cols] T; mean, rstd: [rows] f32.
// Each lane reads only its own elements of dy before writing the same elements of dx.
template <typename T, int V, bool kAdd>
__global__ void layernorm_bwd_dx_kernel_warp_per_row(T* dx, const T* dy, const T* x, const T* gamma,
                                                     const float* mean, const float* rstd,
                                                     int64_t rows, int64_t cols) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t o = row * cols;
  const float m = mean[row], rs = rstd[row];

  float sum_g = 0.0f, sum_gx = 0.0f;
  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    const Packed<T, V> d = load_packed<V>(dy + o + c);
    const Packed<T, V> xv = load_packed<V>(x + o + c);
    const Packed<T, V> gm = load_packed<V>(gamma + c);
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float g = to_f32(d.v[k]) * to_f32(gm.v[k]);
      sum_g += g;
      sum_gx += g * (to_f32(xv.v[k]) - m) * rs;
    }
  }
  const float mean_g = warp_sum(sum_g) / static_cast<float>(cols);
  const float mean_gx = warp_sum(sum_gx) / static_cast<float>(cols);

  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    const Packed<T, V> d = load_packed<V>(dy + o + c);
    const Packed<T, V> xv = load_packed<V>(x + o + c);
    const Packed<T, V> gm = load_packed<V>(gamma + c);
    Packed<T, V> prev;
    if constexpr (kAdd) prev = load_packed<V>(dx + o + c);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      const float g = to_f32(d.v[k]) * to_f32(gm.v[k]);
      const float xhat = (to_f32(xv.v[k]) - m) * rs;
      float v = rs * (g - mean_g - xhat * mean_gx);
      if constexpr (kAdd) v += to_f32(prev.v[k]);
      out.v[k] = from_f32<T>(v);
    }
    store_packed<V>(dx + o + c, out);
  }
}

// Partial column sums over one row group. Block (kTileCols, kTileRows) covers columns
// [blockIdx.x * kTileCols V, +kTileCols V) of group blockIdx.y = rows [g * rows_per_group,
// +rows_per_group); thread (tx, ty) owns the V consecutive columns from (blockIdx.x kTileCols +
// tx) V (one 16-byte load per row when V > 1) and sums rows ty, ty + kTileRows, ... of them,
// then the kTileRows sums are added in ty order. part_dgamma, part_dbeta: [groups, cols] f32 (=).
// dy, x: [rows, cols] T; mean, rstd: [rows] f32. cols % V == 0.
template <typename T, int V>
__global__ void layernorm_bwd_partials_kernel_column_tiles(float* part_dgamma, float* part_dbeta,
                                                           const T* dy, const T* x,
                                                           const float* mean, const float* rstd,
                                                           int64_t rows, int64_t cols,
                                                           int64_t rows_per_group) {
  __shared__ float sh_g[kTileRows][kTileCols * V + 1];
  __shared__ float sh_b[kTileRows][kTileCols * V + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = (static_cast<int64_t>(blockIdx.x) * kTileCols + tx) * V;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_group;
  const int64_t r1 = std::min<int64_t>(rows, r0 + rows_per_group);
  float dg[V], db[V];
#pragma unroll
  for (int k = 0; k < V; ++k) dg[k] = db[k] = 0.0f;
  if (col < cols) {
#pragma unroll 4
    for (int64_t r = r0 + ty; r < r1; r += kTileRows) {
      const Packed<T, V> d = load_packed<V>(dy + r * cols + col);
      const Packed<T, V> xv = load_packed<V>(x + r * cols + col);
      const float m = mean[r], rs = rstd[r];
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float dv = to_f32(d.v[k]);
        dg[k] += dv * (to_f32(xv.v[k]) - m) * rs;
        db[k] += dv;
      }
    }
  }
#pragma unroll
  for (int k = 0; k < V; ++k) {
    sh_g[ty][tx * V + k] = dg[k];
    sh_b[ty][tx * V + k] = db[k];
  }
  __syncthreads();
  // The block's kTileCols V columns, one per thread of the first rows of threads.
  const int t = ty * kTileCols + tx;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kTileCols * V + t;
  if (t < kTileCols * V && c < cols) {
    float tg = 0.0f, tb = 0.0f;
#pragma unroll
    for (int k = 0; k < kTileRows; ++k) {
      tg += sh_g[k][t];
      tb += sh_b[k][t];
    }
    part_dgamma[blockIdx.y * cols + c] = tg;
    part_dbeta[blockIdx.y * cols + c] = tb;
  }
}

// Forward with the row in registers (lane layout: norm_rows.cuh). kResidual as above; the sum
// is written from registers after every load of the row, so sum may alias a or b.
// sum, y, a, b: [rows, cols] T; mean, rstd: [rows] f32; gamma, beta: [cols] T.
template <typename T, int V, int kPacks, bool kResidual>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    layernorm_fwd_kernel_row_in_registers(T* sum, T* y, float* mean, float* rstd, const T* a,
                                          const T* b, const T* gamma, const T* beta, int64_t rows,
                                          int64_t cols, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: shuffles below stay full-warp
  const int64_t o = row * cols;
  // The row's loads are all issued before the first use; gamma and beta are read at the end
  // (L1 hits after the block's first warp; holding them too would cost occupancy).
  Packed<T, V> v[kPacks];
  load_row<T, V, kPacks, kResidual>(v, sum, a, b, o, cols, lane);
  float s = 0.0f;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    if (static_cast<int64_t>(j * 32 + lane) * V < cols) {
#pragma unroll
      for (int k = 0; k < V; ++k) s += to_f32(v[j].v[k]);
    }
  }
  const float m = warp_sum(s) / static_cast<float>(cols);
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    if (static_cast<int64_t>(j * 32 + lane) * V < cols) {
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float d = to_f32(v[j].v[k]) - m;
        ss += d * d;
      }
    }
  }
  const float rs = rsqrtf(warp_sum(ss) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
    if (c < cols) {
      const Packed<T, V> gm = load_packed<V>(gamma + c);
      const Packed<T, V> bt = load_packed<V>(beta + c);
      Packed<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        out.v[k] = from_f32<T>((to_f32(v[j].v[k]) - m) * rs * to_f32(gm.v[k]) + to_f32(bt.v[k]));
      }
      store_packed<V>(y + o + c, out);
    }
  }
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = rs;
  }
}

// Fused backward with the row in registers: block b takes rows [b rows_per_group, +rows_per_group)
// and its warp w rows w, w + kWarps, ... of them. Each lane reads its elements of dy (and x, and
// dx for kAdd) once, writes its elements of dx, and adds dy * xhat and dy into its own slots of
// the warp's shared-memory column sums (no other thread touches them until the barrier). At the
// end the block adds its warps' sums in warp order: part_dgamma, part_dbeta [groups, cols] f32 (=).
// dx, dy, x: [rows, cols] T; gamma: [cols] T; mean, rstd: [rows] f32.
template <typename T, int V, int kPacks, bool kAdd>
__global__ void __launch_bounds__(32 * norm_bwd_warps(kPacks))
    layernorm_bwd_kernel_row_in_registers(T* dx, float* part_dgamma, float* part_dbeta, const T* dy,
                                          const T* x, const T* gamma, const float* mean,
                                          const float* rstd, int64_t rows, int64_t cols,
                                          int64_t rows_per_group) {
  constexpr int kWarps = norm_bwd_warps(kPacks);
  constexpr int kSlots = kPacks * 32;  // packs of a row as laid out over the lanes
  // acc[w][0: dgamma, 1: dbeta][k][p]: warp w's sums for element k of pack p; p = j 32 + lane is
  // lane-consecutive, so a warp's accesses hit 32 different banks.
  extern __shared__ float acc[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* acc_g = acc + (warp * 2) * V * kSlots;
  float* acc_b = acc_g + V * kSlots;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
#pragma unroll
    for (int k = 0; k < V; ++k)
      acc_g[k * kSlots + j * 32 + lane] = acc_b[k * kSlots + j * 32 + lane] = 0.0f;
  }

  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * rows_per_group;
  const int64_t r1 = std::min<int64_t>(rows, r0 + rows_per_group);
  for (int64_t row = r0 + warp; row < r1; row += kWarps) {
    const int64_t o = row * cols;
    // gamma is re-read per row (L1 hits): holding it across rows would cost occupancy.
    Packed<T, V> d[kPacks], xv[kPacks], gm[kPacks], prev[kPacks];
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
      if (c < cols) {
        d[j] = load_packed<V>(dy + o + c);
        xv[j] = load_packed<V>(x + o + c);
        gm[j] = load_packed<V>(gamma + c);
        if constexpr (kAdd) prev[j] = load_packed<V>(dx + o + c);
      }
    }
    const float m = mean[row], rs = rstd[row];
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      if (static_cast<int64_t>(j * 32 + lane) * V < cols) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float dv = to_f32(d[j].v[k]);
          const float xhat = (to_f32(xv[j].v[k]) - m) * rs;
          const float g = dv * to_f32(gm[j].v[k]);
          sum_g += g;
          sum_gx += g * xhat;
          acc_g[k * kSlots + j * 32 + lane] += dv * xhat;
          acc_b[k * kSlots + j * 32 + lane] += dv;
        }
      }
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(cols);
    const float mean_gx = warp_sum(sum_gx) / static_cast<float>(cols);
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
      if (c < cols) {
        Packed<T, V> out;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float g = to_f32(d[j].v[k]) * to_f32(gm[j].v[k]);
          const float xhat = (to_f32(xv[j].v[k]) - m) * rs;
          float v = rs * (g - mean_g - xhat * mean_gx);
          if constexpr (kAdd) v += to_f32(prev[j].v[k]);
          out.v[k] = from_f32<T>(v);
        }
        store_packed<V>(dx + o + c, out);
      }
    }
  }
  __syncthreads();
  // One thread per column c = p V + k (consecutive threads, consecutive columns).
  for (int64_t c = threadIdx.x; c < cols; c += 32 * kWarps) {
    const int i = static_cast<int>(c % V) * kSlots + static_cast<int>(c / V);
    float tg = 0.0f, tb = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      tg += acc[(w * 2) * V * kSlots + i];
      tb += acc[(w * 2 + 1) * V * kSlots + i];
    }
    part_dgamma[blockIdx.x * cols + c] = tg;
    part_dbeta[blockIdx.x * cols + c] = tb;
  }
}

template <typename T, bool kResidual>
void launch_forward(const LayerNormArgs& args, T* sum, T* y, float* mean, float* rstd, const T* a,
                    const T* b, const T* gamma, const T* beta, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool vec = args.cols % kV == 0 && aligned_to(16, {sum, y, a, b, gamma, beta});
  const int64_t blocks = ceil_div(args.rows, kWarpsPerBlock);
  const int packs = row_packs_per_lane(args.cols, kV);
  if (vec && packs > 0) {
    dispatch_packs(packs, [&](auto p) {
      layernorm_fwd_kernel_row_in_registers<T, kV, decltype(p)::value, kResidual>
          <<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(sum, y, mean, rstd, a, b, gamma, beta,
                                                       args.rows, args.cols, args.eps);
    });
  } else if (vec) {
    layernorm_fwd_kernel_warp_per_row<T, kV, kResidual><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        sum, y, mean, rstd, a, b, gamma, beta, args.rows, args.cols, args.eps);
  } else {
    layernorm_fwd_kernel_warp_per_row<T, 1, kResidual><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        sum, y, mean, rstd, a, b, gamma, beta, args.rows, args.cols, args.eps);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

// The fused row-resident backward; returns the number of partial rows it wrote.
template <typename T, int kPacks, bool kAdd>
int64_t launch_backward_rows(const LayerNormArgs& args, T* dx, float* part_dgamma,
                             float* part_dbeta, const T* dy, const T* x, const T* gamma,
                             const float* mean, const float* rstd, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  constexpr int kThreads = 32 * norm_bwd_warps(kPacks);
  constexpr size_t kSmem = size_t{2} * norm_bwd_warps(kPacks) * kV * kPacks * 32 * sizeof(float);
  const auto kernel = layernorm_bwd_kernel_row_in_registers<T, kV, kPacks, kAdd>;
  ANVIL_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // Cached per kernel: a process drives one GPU model.
  static const int64_t resident = resident_blocks(kernel, kThreads, kSmem);
  const int64_t rows_per_group =
      ceil_div(args.rows, std::min(norm_group_capacity(args.rows), resident));
  const int64_t groups = ceil_div(args.rows, rows_per_group);
  kernel<<<static_cast<unsigned>(groups), kThreads, kSmem, stream>>>(
      dx, part_dgamma, part_dbeta, dy, x, gamma, mean, rstd, args.rows, args.cols, rows_per_group);
  ANVIL_CUDA_LAUNCH_CHECK();
  return groups;
}

template <typename T, bool kAdd>
void launch_dx(const LayerNormArgs& args, T* dx, const T* dy, const T* x, const T* gamma,
               const float* mean, const float* rstd, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool vec = args.cols % kV == 0 && aligned_to(16, {dx, dy, x, gamma});
  const int64_t blocks = ceil_div(args.rows, kWarpsPerBlock);
  if (vec) {
    layernorm_bwd_dx_kernel_warp_per_row<T, kV, kAdd><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        dx, dy, x, gamma, mean, rstd, args.rows, args.cols);
  } else {
    layernorm_bwd_dx_kernel_warp_per_row<T, 1, kAdd><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        dx, dy, x, gamma, mean, rstd, args.rows, args.cols);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

template <typename T>
void launch_partials(const LayerNormArgs& args, float* part_dgamma, float* part_dbeta, const T* dy,
                     const T* x, const float* mean, const float* rstd, int64_t groups,
                     int64_t rows_per_group, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool vec = args.cols % kV == 0 && aligned_to(16, {dy, x});
  const dim3 block(kTileCols, kTileRows);
  if (vec) {
    const dim3 grid(static_cast<unsigned>(ceil_div(args.cols, kTileCols * kV)),
                    static_cast<unsigned>(groups));
    layernorm_bwd_partials_kernel_column_tiles<T, kV><<<grid, block, 0, stream>>>(
        part_dgamma, part_dbeta, dy, x, mean, rstd, args.rows, args.cols, rows_per_group);
  } else {
    const dim3 grid(static_cast<unsigned>(ceil_div(args.cols, kTileCols)),
                    static_cast<unsigned>(groups));
    layernorm_bwd_partials_kernel_column_tiles<T, 1><<<grid, block, 0, stream>>>(
        part_dgamma, part_dbeta, dy, x, mean, rstd, args.rows, args.cols, rows_per_group);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& stream) {
  if (args.rows == 0) return;
  dispatch_act<true>(x.dtype, "cuda::layernorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_forward<T, false>(args, nullptr, y.as<T>(), mean.as<float>(), rstd.as<float>(),
                             x.as<T>(), nullptr, gamma.as<T>(), beta.as<T>(), stream.cuda_stream());
  });
}

void residual_layernorm_forward(const LayerNormArgs& args, TensorView sum, TensorView y,
                                TensorView mean, TensorView rstd, ConstTensorView a,
                                ConstTensorView b, ConstTensorView gamma, ConstTensorView beta,
                                Stream& stream) {
  if (args.rows == 0) return;
  dispatch_act<true>(a.dtype, "cuda::residual_layernorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_forward<T, true>(args, sum.as<T>(), y.as<T>(), mean.as<float>(), rstd.as<float>(),
                            a.as<T>(), b.as<T>(), gamma.as<T>(), beta.as<T>(),
                            stream.cuda_stream());
  });
}

// Two [groups, cols] f32 partial arrays, the second starting 256-byte aligned; groups is at most
// norm_group_capacity (row-resident path) >= num_groups (general path).
size_t layernorm_backward_workspace_bytes(const LayerNormArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  const size_t one =
      static_cast<size_t>(norm_group_capacity(args.rows) * args.cols) * sizeof(float);
  const size_t aligned = (one + 255) / 256 * 256;
  return aligned + one;
}

void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace ws, Stream& stream) {
  if (args.rows == 0) return;
  const cudaStream_t s = stream.cuda_stream();
  const size_t one =
      static_cast<size_t>(norm_group_capacity(args.rows) * args.cols) * sizeof(float);
  float* part_dgamma = static_cast<float*>(ws.data);
  float* part_dbeta =
      reinterpret_cast<float*>(static_cast<char*>(ws.data) + (one + 255) / 256 * 256);
  int64_t groups = 0;
  dispatch_act<true>(x.dtype, "cuda::layernorm_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const int packs = row_packs_per_lane(args.cols, kV);
    if (packs > 0 && args.cols % kV == 0 &&
        aligned_to(16, {dx.data, dy.data, x.data, gamma.data})) {
      dispatch_packs(packs, [&](auto p) {
        constexpr int kPacks = decltype(p)::value;
        groups = acc == Accumulate::kAdd
                     ? launch_backward_rows<T, kPacks, true>(
                           args, dx.as<T>(), part_dgamma, part_dbeta, dy.as<T>(), x.as<T>(),
                           gamma.as<T>(), mean.as<float>(), rstd.as<float>(), s)
                     : launch_backward_rows<T, kPacks, false>(
                           args, dx.as<T>(), part_dgamma, part_dbeta, dy.as<T>(), x.as<T>(),
                           gamma.as<T>(), mean.as<float>(), rstd.as<float>(), s);
      });
      return;
    }
    groups = num_groups(args.rows);
    if (acc == Accumulate::kAdd) {
      launch_dx<T, true>(args, dx.as<T>(), dy.as<T>(), x.as<T>(), gamma.as<T>(), mean.as<float>(),
                         rstd.as<float>(), s);
    } else {
      launch_dx<T, false>(args, dx.as<T>(), dy.as<T>(), x.as<T>(), gamma.as<T>(), mean.as<float>(),
                          rstd.as<float>(), s);
    }
    launch_partials<T>(args, part_dgamma, part_dbeta, dy.as<T>(), x.as<T>(), mean.as<float>(),
                       rstd.as<float>(), groups, ceil_div(args.rows, groups), s);
  });
  launch_norm_reduce_partials(dgamma.as<float>(), part_dgamma, dbeta.as<float>(), part_dbeta,
                              groups, args.cols, s);
}

}  // namespace anvil::ops::cuda
