// CUDA LayerNorm over the last dim, optionally fused with the residual add before it:
//   forward : y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps)   (= y, mean, rstd)
//   residual: sum = a + b rounded to T (=), then y = layernorm(sum)  (the rounded sum, as the
//             CPU twin does)
//   backward, with xhat = (x - mean) * rstd and g = dy * gamma:
//     dx = rstd * (g - mean(g) - xhat * mean(g * xhat))   (= or += per Accumulate)
//     dgamma += sum_rows dy * xhat;  dbeta += sum_rows dy   (f32)
// Forward and dx: one warp per row, f32 statistics (two-pass variance over the row, which stays
// in L1/L2 between passes), 16-byte accesses when cols and the pointers allow.
// Backward, bf16 rows of at most kMaxFusedChunks x 256 columns (GPT up to d 2048): one pass.
// Each warp owns kRowsPerWarp consecutive rows, holds a row's dy and x in registers for dx, and
// accumulates dgamma/dbeta of its lane's columns over its rows in registers; the block adds its
// warps' sums in warp order (shared memory) into one partial row per block; a second kernel sums
// the partial rows in block order into dgamma/dbeta.
// Otherwise: the rows are split into `groups` fixed ranges; a column-tiled kernel writes one f32
// partial per (group, column) into the workspace, after the dx kernel; a second kernel sums the
// partials of each column in group order and adds the total into dgamma/dbeta.
// No atomics: deterministic.
#include <algorithm>
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/workspace.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/layernorm.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kWarpsPerBlock = 8;         // rows per block in the warp-per-row kernels
constexpr int kTileCols = 32;             // partial-sum kernel: columns per block (one per lane)
constexpr int kTileRows = 8;              // partial-sum kernel: warps stepping through the rows
constexpr int64_t kMaxGroups = 128;       // row groups (partials per column)
constexpr int64_t kMinRowsPerGroup = 32;  // fewer rows than this per group is not worth it
constexpr int kReduceThreads = 256;
constexpr int kRowsPerWarp = 16;    // fused backward: rows per warp
constexpr int kMaxFusedChunks = 8;  // fused backward: 16-byte column chunks per lane, at most

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
// [blockIdx.x * kTileCols, +kTileCols) of group blockIdx.y = rows [g * rows_per_group, +rows_per
// _group); thread (tx, ty) sums rows ty, ty + kTileRows, ... of its column, then the kTileRows
// sums are added in ty order. part_dgamma, part_dbeta: [groups, cols] f32 (=).
// dy, x: [rows, cols] T; mean, rstd: [rows] f32.
template <typename T>
__global__ void layernorm_bwd_partials_kernel_column_tiles(float* part_dgamma, float* part_dbeta,
                                                           const T* dy, const T* x,
                                                           const float* mean, const float* rstd,
                                                           int64_t rows, int64_t cols,
                                                           int64_t rows_per_group) {
  __shared__ float sh_g[kTileRows][kTileCols + 1];
  __shared__ float sh_b[kTileRows][kTileCols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTileCols + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_group;
  const int64_t r1 = std::min<int64_t>(rows, r0 + rows_per_group);
  float dg = 0.0f, db = 0.0f;
  if (col < cols) {
    for (int64_t r = r0 + ty; r < r1; r += kTileRows) {
      const float d = to_f32(dy[r * cols + col]);
      const float xhat = (to_f32(x[r * cols + col]) - mean[r]) * rstd[r];
      dg += d * xhat;
      db += d;
    }
  }
  sh_g[ty][tx] = dg;
  sh_b[ty][tx] = db;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float tg = 0.0f, tb = 0.0f;
#pragma unroll
    for (int k = 0; k < kTileRows; ++k) {
      tg += sh_g[k][tx];
      tb += sh_b[k][tx];
    }
    part_dgamma[blockIdx.y * cols + col] = tg;
    part_dbeta[blockIdx.y * cols + col] = tb;
  }
}

// Fused backward, one block of kWarpsPerBlock warps = kWarpsPerBlock * kRowsPerWarp rows.
// Lane columns: c = lane V + j 32 V for j < kChunks (cols % V == 0, cols <= kChunks 32 V).
// dx, dy, x: [rows, cols] T; gamma: [cols] T; mean, rstd: [rows] f32;
// part_dgamma, part_dbeta: [gridDim.x, cols] f32 (=); shared: [kWarpsPerBlock, cols] f32.
template <typename T, int V, int kChunks, bool kAdd>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    layernorm_bwd_fused_kernel(T* dx, float* part_dgamma, float* part_dbeta, const T* dy,
                               const T* x, const T* gamma, const float* mean, const float* rstd,
                               int64_t rows, int64_t cols) {
  extern __shared__ float sh_cols[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t r0 = (static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + warp) * kRowsPerWarp;
  const int64_t r1 = std::min<int64_t>(rows, r0 + kRowsPerWarp);
  Packed<T, V> gm[kChunks];
  float dg[kChunks][V], db[kChunks][V];
#pragma unroll
  for (int j = 0; j < kChunks; ++j) {
    const int64_t c = lane * V + j * 32 * V;
    if (c < cols) gm[j] = load_packed<V>(gamma + c);
#pragma unroll
    for (int k = 0; k < V; ++k) dg[j][k] = db[j][k] = 0.0f;
  }
  for (int64_t row = r0; row < r1; ++row) {
    const int64_t o = row * cols;
    const float m = mean[row], rs = rstd[row];
    Packed<T, V> d[kChunks], xv[kChunks];
    float sum_g = 0.0f, sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t c = lane * V + j * 32 * V;
      if (c >= cols) continue;
      d[j] = load_packed<V>(dy + o + c);
      xv[j] = load_packed<V>(x + o + c);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float dyv = to_f32(d[j].v[k]), xhat = (to_f32(xv[j].v[k]) - m) * rs;
        const float g = dyv * to_f32(gm[j].v[k]);
        sum_g += g;
        sum_gx += g * xhat;
        dg[j][k] += dyv * xhat;
        db[j][k] += dyv;
      }
    }
    const float mean_g = warp_sum(sum_g) / static_cast<float>(cols);
    const float mean_gx = warp_sum(sum_gx) / static_cast<float>(cols);
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t c = lane * V + j * 32 * V;
      if (c >= cols) continue;
      Packed<T, V> prev;
      if constexpr (kAdd) prev = load_packed<V>(dx + o + c);
      Packed<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const float g = to_f32(d[j].v[k]) * to_f32(gm[j].v[k]);
        const float xhat = (to_f32(xv[j].v[k]) - m) * rs;
        float v = rs * (g - mean_g - xhat * mean_gx);
        if constexpr (kAdd) v += to_f32(prev.v[k]);
        out.v[k] = from_f32<T>(v);
      }
      store_packed<V>(dx + o + c, out);
    }
  }
  // The block's warps' column sums, added in warp order: dgamma, then dbeta.
  for (int which = 0; which < 2; ++which) {
#pragma unroll
    for (int j = 0; j < kChunks; ++j) {
      const int64_t c = lane * V + j * 32 * V;
      if (c >= cols) continue;
#pragma unroll
      for (int k = 0; k < V; ++k) sh_cols[warp * cols + c + k] = which == 0 ? dg[j][k] : db[j][k];
    }
    __syncthreads();
    float* part = which == 0 ? part_dgamma : part_dbeta;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
      float t = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarpsPerBlock; ++w) t += sh_cols[w * cols + c];
      part[blockIdx.x * cols + c] = t;
    }
    __syncthreads();
  }
}

// dgamma[c] += sum_g part_dgamma[g, c]; dbeta likewise, summed in group order.
__global__ void layernorm_bwd_reduce_kernel_column_per_thread(float* dgamma, float* dbeta,
                                                              const float* part_dgamma,
                                                              const float* part_dbeta,
                                                              int64_t groups, int64_t cols) {
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (col >= cols) return;
  float tg = 0.0f, tb = 0.0f;
  for (int64_t g = 0; g < groups; ++g) {
    tg += part_dgamma[g * cols + col];
    tb += part_dbeta[g * cols + col];
  }
  dgamma[col] += tg;
  dbeta[col] += tb;
}

template <typename T, bool kResidual>
void launch_forward(const LayerNormArgs& args, T* sum, T* y, float* mean, float* rstd, const T* a,
                    const T* b, const T* gamma, const T* beta, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool vec = args.cols % kV == 0 && aligned_to(16, {sum, y, a, b, gamma, beta});
  const int64_t blocks = ceil_div(args.rows, kWarpsPerBlock);
  if (vec) {
    layernorm_fwd_kernel_warp_per_row<T, kV, kResidual><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        sum, y, mean, rstd, a, b, gamma, beta, args.rows, args.cols, args.eps);
  } else {
    layernorm_fwd_kernel_warp_per_row<T, 1, kResidual><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        sum, y, mean, rstd, a, b, gamma, beta, args.rows, args.cols, args.eps);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
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

}  // namespace

void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& stream) {
  if (args.rows == 0) return;
  dispatch_act(x.dtype, "cuda::layernorm_forward", [&](auto tag) {
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
  dispatch_act(a.dtype, "cuda::residual_layernorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_forward<T, true>(args, sum.as<T>(), y.as<T>(), mean.as<float>(), rstd.as<float>(),
                            a.as<T>(), b.as<T>(), gamma.as<T>(), beta.as<T>(),
                            stream.cuda_stream());
  });
}

namespace {

// Column chunks per lane of the fused backward (0: the two-kernel path).
int fused_chunks(const LayerNormArgs& args) {
  constexpr int kV = kVec16<__nv_bfloat16>;
  if (args.cols % kV != 0) return 0;
  const int64_t chunks = ceil_div(args.cols, 32 * kV);
  return chunks <= kMaxFusedChunks ? static_cast<int>(chunks) : 0;
}

// Partial rows: blocks of the fused path, or row groups of the two-kernel path.
int64_t partial_rows(const LayerNormArgs& args, bool fused) {
  return fused ? ceil_div(args.rows, kWarpsPerBlock * kRowsPerWarp) : num_groups(args.rows);
}

template <int kChunks, bool kAdd>
void launch_fused(const LayerNormArgs& args, int64_t blocks, __nv_bfloat16* dx, float* part_dgamma,
                  float* part_dbeta, const __nv_bfloat16* dy, const __nv_bfloat16* x,
                  const __nv_bfloat16* gamma, const float* mean, const float* rstd,
                  cudaStream_t s) {
  constexpr int kV = kVec16<__nv_bfloat16>;
  auto* kernel = layernorm_bwd_fused_kernel<__nv_bfloat16, kV, kChunks, kAdd>;
  const size_t smem = static_cast<size_t>(kWarpsPerBlock * args.cols) * sizeof(float);
  ANVIL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  kernel<<<blocks, 32 * kWarpsPerBlock, smem, s>>>(dx, part_dgamma, part_dbeta, dy, x, gamma, mean,
                                                   rstd, args.rows, args.cols);
  ANVIL_CUDA_LAUNCH_CHECK();
}

using FusedLaunch = void (*)(const LayerNormArgs&, int64_t, __nv_bfloat16*, float*, float*,
                             const __nv_bfloat16*, const __nv_bfloat16*, const __nv_bfloat16*,
                             const float*, const float*, cudaStream_t);

// The fused kernel's launcher for 1 <= chunks <= kMaxFusedChunks.
template <bool kAdd>
FusedLaunch fused_launcher(int chunks) {
  static constexpr FusedLaunch kTable[kMaxFusedChunks] = {
      launch_fused<1, kAdd>, launch_fused<2, kAdd>, launch_fused<3, kAdd>, launch_fused<4, kAdd>,
      launch_fused<5, kAdd>, launch_fused<6, kAdd>, launch_fused<7, kAdd>, launch_fused<8, kAdd>};
  return kTable[chunks - 1];
}

// The general backward: the dx kernel, then the column-tiled partial sums (any dtype, width).
void two_kernel_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx,
                         ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                         ConstTensorView mean, ConstTensorView rstd, float* part_dgamma,
                         float* part_dbeta, int64_t rows_per_group, int64_t groups,
                         cudaStream_t s) {
  dispatch_act(x.dtype, "cuda::layernorm_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (acc == Accumulate::kAdd) {
      launch_dx<T, true>(args, dx.as<T>(), dy.as<T>(), x.as<T>(), gamma.as<T>(), mean.as<float>(),
                         rstd.as<float>(), s);
    } else {
      launch_dx<T, false>(args, dx.as<T>(), dy.as<T>(), x.as<T>(), gamma.as<T>(), mean.as<float>(),
                          rstd.as<float>(), s);
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(args.cols, kTileCols)),
                    static_cast<unsigned>(groups));
    layernorm_bwd_partials_kernel_column_tiles<T><<<grid, dim3(kTileCols, kTileRows), 0, s>>>(
        part_dgamma, part_dbeta, dy.as<T>(), x.as<T>(), mean.as<float>(), rstd.as<float>(),
        args.rows, args.cols, rows_per_group);
    ANVIL_CUDA_LAUNCH_CHECK();
  });
}

}  // namespace

// Two [partial rows, cols] f32 partial arrays, the second starting 256-byte aligned (enough for
// either path).
size_t layernorm_backward_workspace_bytes(const LayerNormArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  const int64_t parts = std::max(partial_rows(args, true), partial_rows(args, false));
  const size_t one = static_cast<size_t>(parts * args.cols) * sizeof(float);
  const size_t aligned = (one + 255) / 256 * 256;
  return aligned + one;
}

void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace ws, Stream& stream) {
  if (args.rows == 0) return;
  const cudaStream_t s = stream.cuda_stream();
  const int chunks =
      x.dtype == engine::DType::kBF16 && aligned_to(16, {dx.data, dy.data, x.data, gamma.data})
          ? fused_chunks(args)
          : 0;
  const int64_t groups = partial_rows(args, chunks > 0);
  const int64_t rows_per_group = ceil_div(args.rows, groups);
  const size_t one = static_cast<size_t>(groups * args.cols) * sizeof(float);
  float* part_dgamma = static_cast<float*>(ws.data);
  float* part_dbeta =
      reinterpret_cast<float*>(static_cast<char*>(ws.data) + (one + 255) / 256 * 256);
  if (chunks > 0) {
    using B = __nv_bfloat16;
    const FusedLaunch launch =
        acc == Accumulate::kAdd ? fused_launcher<true>(chunks) : fused_launcher<false>(chunks);
    launch(args, groups, dx.as<B>(), part_dgamma, part_dbeta, dy.as<B>(), x.as<B>(), gamma.as<B>(),
           mean.as<float>(), rstd.as<float>(), s);
  } else {
    two_kernel_backward(args, acc, dx, dy, x, gamma, mean, rstd, part_dgamma, part_dbeta,
                        rows_per_group, groups, s);
  }
  layernorm_bwd_reduce_kernel_column_per_thread<<<ceil_div(args.cols, kReduceThreads),
                                                  kReduceThreads, 0, s>>>(
      dgamma.as<float>(), dbeta.as<float>(), part_dgamma, part_dbeta, groups, args.cols);
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
