// CUDA RMSNorm over the last dim, optionally fused with the residual add before it:
//   forward : rstd = 1/sqrt(mean(x^2) + eps),  y = round_T(x * rstd) * gamma   (= y, rstd)
//   residual: sum = a + b rounded to T (=), then y = rmsnorm(sum)  (the rounded sum, as the CPU
//             twin does)
//   backward, with xhat = x * rstd and g = dy * gamma:
//     dx = rstd * (g - xhat * mean(g * xhat))   (= or += per Accumulate)
//     dgamma += sum_rows dy * xhat   (f32)
// The structure of ops/cuda/layernorm.cu: a row-resident path (one warp per row holding it in
// registers, norm_rows.cuh; the backward one kernel writing dx and per-block dgamma partials)
// for aligned rows of cols % V == 0, cols <= 256 V, and the general path (warp per row re-reading
// the row, dgamma partials from a column-tiled kernel) otherwise. The partials (f32, in the
// workspace) are summed per column in group order. No atomics: deterministic.
#include <algorithm>
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/workspace.h"
#include "ops/cuda/norm_rows.cuh"
#include "ops/cuda/vec_io.cuh"
#include "ops/rmsnorm.h"

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
// sum, y, a, b: [rows, cols] T; rstd: [rows] f32; gamma: [cols] T.
// The lane owns elements [c, c + V) for c = lane V, lane V + 32 V, ... (cols % V == 0).
template <typename T, int V, bool kResidual>
__global__ void rmsnorm_fwd_kernel_warp_per_row(T* sum, T* y, float* rstd, const T* a, const T* b,
                                                const T* gamma, int64_t rows, int64_t cols,
                                                float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: shuffles below stay full-warp
  const int64_t o = row * cols;
  const T* src = kResidual ? sum + o : a + o;

  float ss = 0.0f;
  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    Packed<T, V> v = load_packed<V>(a + o + c);
    if constexpr (kResidual) {
      const Packed<T, V> w = load_packed<V>(b + o + c);
#pragma unroll
      for (int k = 0; k < V; ++k) v.v[k] = from_f32<T>(to_f32(v.v[k]) + to_f32(w.v[k]));
      store_packed<V>(sum + o + c, v);
    }
#pragma unroll
    for (int k = 0; k < V; ++k) ss += to_f32(v.v[k]) * to_f32(v.v[k]);
  }
  const float rs = rsqrtf(warp_sum(ss) / static_cast<float>(cols) + eps);

  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    const Packed<T, V> v = load_packed<V>(src + c);
    const Packed<T, V> g = load_packed<V>(gamma + c);
    Packed<T, V> out;
#pragma unroll
    for (int k = 0; k < V; ++k) {
      // HF: weight * (x * rstd).to(input dtype)
      const float xn = to_f32(from_f32<T>(to_f32(v.v[k]) * rs));
      out.v[k] = from_f32<T>(xn * to_f32(g.v[k]));
    }
    store_packed<V>(y + o + c, out);
  }
  if (lane == 0) rstd[row] = rs;
}

// dx for one row per warp. dx, dy, x: [rows, cols] T; gamma: [cols] T; rstd: [rows] f32.
// Each lane reads only its own elements of dy before writing the same elements of dx.
template <typename T, int V, bool kAdd>
__global__ void rmsnorm_bwd_dx_kernel_warp_per_row(T* dx, const T* dy, const T* x, const T* gamma,
                                                   const float* rstd, int64_t rows, int64_t cols) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int64_t o = row * cols;
  const float rs = rstd[row];

  float sum_gx = 0.0f;
  for (int64_t c = lane * V; c < cols; c += 32 * V) {
    const Packed<T, V> d = load_packed<V>(dy + o + c);
    const Packed<T, V> xv = load_packed<V>(x + o + c);
    const Packed<T, V> gm = load_packed<V>(gamma + c);
#pragma unroll
    for (int k = 0; k < V; ++k) sum_gx += to_f32(d.v[k]) * to_f32(gm.v[k]) * to_f32(xv.v[k]) * rs;
  }
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
      float v = rs * (g - to_f32(xv.v[k]) * rs * mean_gx);
      if constexpr (kAdd) v += to_f32(prev.v[k]);
      out.v[k] = from_f32<T>(v);
    }
    store_packed<V>(dx + o + c, out);
  }
}

// Partial column sums of dy * xhat over one row group. Block (kTileCols, kTileRows) covers
// columns [blockIdx.x * kTileCols, +kTileCols) of group blockIdx.y = rows [g * rows_per_group,
// +rows_per_group); thread (tx, ty) sums rows ty, ty + kTileRows, ... of its column, then the
// kTileRows sums are added in ty order. part_dgamma: [groups, cols] f32 (=).
// dy, x: [rows, cols] T; rstd: [rows] f32.
template <typename T>
__global__ void rmsnorm_bwd_partials_kernel_column_tiles(float* part_dgamma, const T* dy,
                                                         const T* x, const float* rstd,
                                                         int64_t rows, int64_t cols,
                                                         int64_t rows_per_group) {
  __shared__ float sh[kTileRows][kTileCols + 1];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kTileCols + tx;
  const int64_t r0 = static_cast<int64_t>(blockIdx.y) * rows_per_group;
  const int64_t r1 = std::min<int64_t>(rows, r0 + rows_per_group);
  float dg = 0.0f;
  if (col < cols) {
    for (int64_t r = r0 + ty; r < r1; r += kTileRows) {
      dg += to_f32(dy[r * cols + col]) * to_f32(x[r * cols + col]) * rstd[r];
    }
  }
  sh[ty][tx] = dg;
  __syncthreads();
  if (ty == 0 && col < cols) {
    float t = 0.0f;
#pragma unroll
    for (int k = 0; k < kTileRows; ++k) t += sh[k][tx];
    part_dgamma[blockIdx.y * cols + col] = t;
  }
}

// Forward with the row in registers (lane layout: norm_rows.cuh). kResidual as above; the sum
// is written from registers after every load of the row, so sum may alias a or b.
// sum, y, a, b: [rows, cols] T; rstd: [rows] f32; gamma: [cols] T.
template <typename T, int V, int kPacks, bool kResidual>
__global__ void __launch_bounds__(32 * kWarpsPerBlock)
    rmsnorm_fwd_kernel_row_in_registers(T* sum, T* y, float* rstd, const T* a, const T* b,
                                        const T* gamma, int64_t rows, int64_t cols, float eps) {
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp leaves together: shuffles below stay full-warp
  const int64_t o = row * cols;
  // The row's loads are all issued before the first use; gamma is read at the end (L1 hits
  // after the block's first warp; holding it too would cost occupancy).
  Packed<T, V> v[kPacks];
  load_row<T, V, kPacks, kResidual>(v, sum, a, b, o, cols, lane);
  float ss = 0.0f;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    if (static_cast<int64_t>(j * 32 + lane) * V < cols) {
#pragma unroll
      for (int k = 0; k < V; ++k) ss += to_f32(v[j].v[k]) * to_f32(v[j].v[k]);
    }
  }
  const float rs = rsqrtf(warp_sum(ss) / static_cast<float>(cols) + eps);
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
    const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
    if (c < cols) {
      const Packed<T, V> gm = load_packed<V>(gamma + c);
      Packed<T, V> out;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        // HF: weight * (x * rstd).to(input dtype)
        const float xn = to_f32(from_f32<T>(to_f32(v[j].v[k]) * rs));
        out.v[k] = from_f32<T>(xn * to_f32(gm.v[k]));
      }
      store_packed<V>(y + o + c, out);
    }
  }
  if (lane == 0) rstd[row] = rs;
}

// Fused backward with the row in registers: block b takes rows [b rows_per_group, +rows_per_group)
// and its warp w rows w, w + kWarps, ... of them. Each lane reads its elements of dy (and x, and
// dx for kAdd) once, writes its elements of dx, and adds dy * xhat into its own slots of the
// warp's shared-memory column sums (no other thread touches them until the barrier). At the end
// the block adds its warps' sums in warp order: part_dgamma [groups, cols] f32 (=).
// dx, dy, x: [rows, cols] T; gamma: [cols] T; rstd: [rows] f32.
template <typename T, int V, int kPacks, bool kAdd>
__global__ void __launch_bounds__(32 * norm_bwd_warps(kPacks))
    rmsnorm_bwd_kernel_row_in_registers(T* dx, float* part_dgamma, const T* dy, const T* x,
                                        const T* gamma, const float* rstd, int64_t rows,
                                        int64_t cols, int64_t rows_per_group) {
  constexpr int kWarps = norm_bwd_warps(kPacks);
  constexpr int kSlots = kPacks * 32;  // packs of a row as laid out over the lanes
  // acc[w][k][p]: warp w's sum for element k of pack p; p = j 32 + lane is lane-consecutive, so
  // a warp's accesses hit 32 different banks.
  extern __shared__ float acc[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  float* acc_g = acc + warp * V * kSlots;
#pragma unroll
  for (int j = 0; j < kPacks; ++j) {
#pragma unroll
    for (int k = 0; k < V; ++k) acc_g[k * kSlots + j * 32 + lane] = 0.0f;
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
    const float rs = rstd[row];
    float sum_gx = 0.0f;
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      if (static_cast<int64_t>(j * 32 + lane) * V < cols) {
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float dv = to_f32(d[j].v[k]);
          const float xhat = to_f32(xv[j].v[k]) * rs;
          sum_gx += dv * to_f32(gm[j].v[k]) * xhat;
          acc_g[k * kSlots + j * 32 + lane] += dv * xhat;
        }
      }
    }
    const float mean_gx = warp_sum(sum_gx) / static_cast<float>(cols);
#pragma unroll
    for (int j = 0; j < kPacks; ++j) {
      const int64_t c = static_cast<int64_t>(j * 32 + lane) * V;
      if (c < cols) {
        Packed<T, V> out;
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const float g = to_f32(d[j].v[k]) * to_f32(gm[j].v[k]);
          float v = rs * (g - to_f32(xv[j].v[k]) * rs * mean_gx);
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
    float t = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) t += acc[w * V * kSlots + i];
    part_dgamma[blockIdx.x * cols + c] = t;
  }
}

template <typename T, bool kResidual>
void launch_forward(const RmsNormArgs& args, T* sum, T* y, float* rstd, const T* a, const T* b,
                    const T* gamma, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool vec = args.cols % kV == 0 && aligned_to(16, {sum, y, a, b, gamma});
  const int64_t blocks = ceil_div(args.rows, kWarpsPerBlock);
  const int packs = row_packs_per_lane(args.cols, kV);
  if (vec && packs > 0) {
    dispatch_packs(packs, [&](auto p) {
      rmsnorm_fwd_kernel_row_in_registers<T, kV, decltype(p)::value, kResidual>
          <<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(sum, y, rstd, a, b, gamma, args.rows,
                                                       args.cols, args.eps);
    });
  } else if (vec) {
    rmsnorm_fwd_kernel_warp_per_row<T, kV, kResidual><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        sum, y, rstd, a, b, gamma, args.rows, args.cols, args.eps);
  } else {
    rmsnorm_fwd_kernel_warp_per_row<T, 1, kResidual><<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(
        sum, y, rstd, a, b, gamma, args.rows, args.cols, args.eps);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

// The fused row-resident backward; returns the number of partial rows it wrote.
template <typename T, int kPacks, bool kAdd>
int64_t launch_backward_rows(const RmsNormArgs& args, T* dx, float* part_dgamma, const T* dy,
                             const T* x, const T* gamma, const float* rstd, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  constexpr int kThreads = 32 * norm_bwd_warps(kPacks);
  constexpr size_t kSmem = size_t{1} * norm_bwd_warps(kPacks) * kV * kPacks * 32 * sizeof(float);
  const auto kernel = rmsnorm_bwd_kernel_row_in_registers<T, kV, kPacks, kAdd>;
  ANVIL_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  // Cached per kernel: a process drives one GPU model.
  static const int64_t resident = resident_blocks(kernel, kThreads, kSmem);
  const int64_t rows_per_group =
      ceil_div(args.rows, std::min(norm_group_capacity(args.rows), resident));
  const int64_t groups = ceil_div(args.rows, rows_per_group);
  kernel<<<static_cast<unsigned>(groups), kThreads, kSmem, stream>>>(
      dx, part_dgamma, dy, x, gamma, rstd, args.rows, args.cols, rows_per_group);
  ANVIL_CUDA_LAUNCH_CHECK();
  return groups;
}

template <typename T, bool kAdd>
void launch_dx(const RmsNormArgs& args, T* dx, const T* dy, const T* x, const T* gamma,
               const float* rstd, cudaStream_t stream) {
  constexpr int kV = kVec16<T>;
  const bool vec = args.cols % kV == 0 && aligned_to(16, {dx, dy, x, gamma});
  const int64_t blocks = ceil_div(args.rows, kWarpsPerBlock);
  if (vec) {
    rmsnorm_bwd_dx_kernel_warp_per_row<T, kV, kAdd>
        <<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(dx, dy, x, gamma, rstd, args.rows, args.cols);
  } else {
    rmsnorm_bwd_dx_kernel_warp_per_row<T, 1, kAdd>
        <<<blocks, 32 * kWarpsPerBlock, 0, stream>>>(dx, dy, x, gamma, rstd, args.rows, args.cols);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void rmsnorm_forward(const RmsNormArgs& args, TensorView y, TensorView rstd, ConstTensorView x,
                     ConstTensorView gamma, Stream& stream) {
  if (args.rows == 0) return;
  dispatch_act<true>(x.dtype, "cuda::rmsnorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_forward<T, false>(args, nullptr, y.as<T>(), rstd.as<float>(), x.as<T>(), nullptr,
                             gamma.as<T>(), stream.cuda_stream());
  });
}

void residual_rmsnorm_forward(const RmsNormArgs& args, TensorView sum, TensorView y,
                              TensorView rstd, ConstTensorView a, ConstTensorView b,
                              ConstTensorView gamma, Stream& stream) {
  if (args.rows == 0) return;
  dispatch_act<true>(a.dtype, "cuda::residual_rmsnorm_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_forward<T, true>(args, sum.as<T>(), y.as<T>(), rstd.as<float>(), a.as<T>(), b.as<T>(),
                            gamma.as<T>(), stream.cuda_stream());
  });
}

// One [groups, cols] f32 partial array; groups is at most norm_group_capacity (row-resident
// path) >= num_groups (general path).
size_t rmsnorm_backward_workspace_bytes(const RmsNormArgs& args) {
  if (args.rows <= 0 || args.cols <= 0) return 0;
  return static_cast<size_t>(norm_group_capacity(args.rows) * args.cols) * sizeof(float);
}

void rmsnorm_backward(const RmsNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                      ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                      ConstTensorView rstd, Workspace ws, Stream& stream) {
  if (args.rows == 0) return;
  const cudaStream_t s = stream.cuda_stream();
  float* part_dgamma = static_cast<float*>(ws.data);
  int64_t groups = 0;
  dispatch_act<true>(x.dtype, "cuda::rmsnorm_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const int packs = row_packs_per_lane(args.cols, kV);
    if (packs > 0 && args.cols % kV == 0 &&
        aligned_to(16, {dx.data, dy.data, x.data, gamma.data})) {
      dispatch_packs(packs, [&](auto p) {
        constexpr int kPacks = decltype(p)::value;
        groups = acc == Accumulate::kAdd
                     ? launch_backward_rows<T, kPacks, true>(args, dx.as<T>(), part_dgamma,
                                                             dy.as<T>(), x.as<T>(), gamma.as<T>(),
                                                             rstd.as<float>(), s)
                     : launch_backward_rows<T, kPacks, false>(args, dx.as<T>(), part_dgamma,
                                                              dy.as<T>(), x.as<T>(), gamma.as<T>(),
                                                              rstd.as<float>(), s);
      });
      return;
    }
    groups = num_groups(args.rows);
    if (acc == Accumulate::kAdd) {
      launch_dx<T, true>(args, dx.as<T>(), dy.as<T>(), x.as<T>(), gamma.as<T>(), rstd.as<float>(),
                         s);
    } else {
      launch_dx<T, false>(args, dx.as<T>(), dy.as<T>(), x.as<T>(), gamma.as<T>(), rstd.as<float>(),
                          s);
    }
    const dim3 grid(static_cast<unsigned>(ceil_div(args.cols, kTileCols)),
                    static_cast<unsigned>(groups));
    rmsnorm_bwd_partials_kernel_column_tiles<T><<<grid, dim3(kTileCols, kTileRows), 0, s>>>(
        part_dgamma, dy.as<T>(), x.as<T>(), rstd.as<float>(), args.rows, args.cols,
        ceil_div(args.rows, groups));
    ANVIL_CUDA_LAUNCH_CHECK();
  });
  launch_norm_reduce_partials(dgamma.as<float>(), part_dgamma, nullptr, nullptr, groups, args.cols,
                              s);
}

}  // namespace anvil::ops::cuda
