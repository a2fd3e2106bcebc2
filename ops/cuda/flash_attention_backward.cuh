// CUDA backward of ops/flash_attention.h, deterministic (no atomics), in two kernels:
//   dq     : a block owns 64 MT queries; first dvec_i = sum_d dout_id out_id (= dvec, scratch),
//            then it walks the visible key blocks (K, V double-buffered):
//            P = 2^(x - lse log2 e);  dP = keep/(1-p) dout V^T;  dS = P (dP - dvec_i)
//            dq = scale sum_j dS_ij k_j                                             (=)
//   dkdv   : a block owns 64 MT keys (K, V in smem), walks the query blocks that see them
//            (causal: from the diagonal, or the first query whose prefix_end passes the block)
//            (Q, dout double-buffered):
//            with the same P, dP, dS in transposed form (rows = keys):
//            dv_j = sum_i keep/(1-p) P_ij dout_i;  dk_j = scale sum_i dS_ij q_i    (=)
//            Grouped-query attention: a block owns keys of one kv head and walks the query
//            blocks of each query head of its group in turn (dk, dv summed in registers, in
//            head order, so still deterministic); the dq kernel reads kv head h / group.
// Splitting dq from dk/dv recomputes Q K^T and dout V^T once more (7 tensor-core products per
// tile instead of 5) but keeps every sum in a fixed order, so runs are bitwise reproducible.
// Relative buckets (T5): d bias_ij = dS_ij, so d rel_table[u, h] += sum of dS over the (b, i, j)
// whose diagonal j - i falls in bucket u. The dq kernel sums dS along the diagonals per 16-row
// strip (add_strip_diagonals), then over its strips into a per-block row (drel_rows);
// drel_reduce_diagonals adds the rows over blocks and samples, drel_reduce_buckets the
// diagonals of each bucket: fixed orders throughout. Both kernels read the bias from a per-block
// band in smem (load_rel_band).
// Templated on the element type T and the tile width D (ops/cuda/flash_attention_tiles.cuh);
// flash_attention_backward_{bf16,f16}.cu compile one element type each. Widths over 128 split
// dkdv into a dv kernel and a dk kernel (kPart): dk and dv of one m-tile would take 2 D / 2
// accumulator registers a thread, more than there are.
#pragma once

#include <algorithm>
#include <string>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/cuda/flash_attention_launch.h"
#include "ops/cuda/flash_attention_tiles.cuh"

namespace anvil::ops::cuda::flash {

// dvec of a dq block's kM rows, dvec_i = sum_d dout_id out_id in f32, kThreads / kM threads a
// row: into smem for this block and to global memory for the dk/dv kernel that runs next.
// Columns past the head size (dh < D) are not read.
template <typename T, int D, int kM>
__device__ __forceinline__ void block_rowdot(float* s_dvec, const Params& p, int b, int h, int q0) {
  using T2 = decltype(pair_of<T>(0.f, 0.f));
  constexpr int kParts = kThreads / kM, kCols = D / kParts;
  static_assert(kCols % 8 == 0, "16-byte loads");
  const int row = threadIdx.x / kParts, part = threadIdx.x % kParts, i = q0 + row;
  float sum = 0.f;
  if (i < p.tq) {
    const int64_t col0 = int64_t(h) * p.dh + part * kCols;
    const T* d = act<T>(p.dout) + (int64_t(b) * p.tq + i) * p.ldd + col0;
    const T* o = act<T>(p.out) + (int64_t(b) * p.tq + i) * p.ldo + col0;
#pragma unroll
    for (int c = 0; c < kCols; c += 8) {
      if (part * kCols + c >= p.dh) break;
      const uint4 dd = *reinterpret_cast<const uint4*>(d + c);
      const uint4 oo = *reinterpret_cast<const uint4*>(o + c);
      const T2* d2 = reinterpret_cast<const T2*>(&dd);
      const T2* o2 = reinterpret_cast<const T2*>(&oo);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const float2 x = to_float2(d2[k]), y = to_float2(o2[k]);
        sum = fmaf(x.x, y.x, sum);
        sum = fmaf(x.y, y.y, sum);
      }
    }
  }
#pragma unroll
  for (int m = 1; m < kParts; m *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, m);
  if (part == 0) {
    s_dvec[row] = sum;
    if (i < p.tq) p.dvec[(int64_t(b) * p.heads + h) * p.tq + i] = sum;
  }
}

// A warp's [16 MT, D] accumulator times s (rows row0 ...) to columns [0, dh) of a row-strided
// matrix (rows < rows).
template <typename T, int D, int MT>
__device__ __forceinline__ void store_rows(T* g, int64_t ld, int row0, int rows,
                                           const float (&acc)[MT][D / 8][4], float s, int dh) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + mt * 16 + (lane >> 2) + r * 8;
      if (row < rows) store_row<T, D>(g + int64_t(row) * ld, acc[mt], r, s, dh);
    }
  }
}

// dq kernel, N keys from k0: s holds Q K^T and dp dout V^T of a warp m-tile's rows; s becomes
// dS. saved: the strip's saved keep-bit word of this 64-key block (p.keep_bits given), else
// the bits are drawn.
template <int N, bool kCheck, bool kDropout, bool kBias>
__device__ __forceinline__ void dq_scores(float (&s)[N / 8][4], const float (&dp)[N / 8][4],
                                          const Scorer& sc, const float (&lse2)[2],
                                          const float (&dvec)[2], uint32_t saved, int row_base,
                                          int k0) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int n = 0; n < N / 8; ++n) {
    const uint32_t kept = !kDropout ? 0xfu
                          : sc.p.keep_bits != nullptr
                              ? (saved >> (4 * ((k0 % kRows) / 8 + n))) & 0xfu
                              : sc.keep_rows(row_base, k0 + n * 8 + 2 * t);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int r = c >> 1, i = row_base + r * 8, j = k0 + n * 8 + 2 * t + (c & 1);
      const float pr = ex2(sc.logit<kCheck, kBias>(s[n][c], i, j) - lse2[r]);
      const float dpk = !kDropout            ? dp[n][c]
                        : ((kept >> c) & 1u) ? dp[n][c] * sc.p.keep_scale
                                             : 0.f;
      s[n][c] = pr * (dpk - dvec[r]);
    }
  }
}

// Relative buckets, dq kernel: sums of dS along the diagonals of each 16-row strip (a warp's
// m-tile), with no block barrier. For an N-key slice from kc, thread (g, t) holds rows g, g + 8
// and keys 8 n + 2 t + cc, so its 2 N / 8 elements lie on the diagonals key - row =
// 8 (q - 1) + 2 t + cc - g (q in [0, N / 8], cc in {0, 1}), one or two elements each: it adds
// those in registers and writes slot x = diagonal + 15 of its row g of the warp's
// [8, kPartStride] scratch (slots no thread writes stay 0 from the start). Lane l then adds the
// 8 rows of slots l, l + 32, ... into the strip's running sums at kc + x; slices start at
// multiples of 32, so lane l owns every running sum at an index = l mod 32 throughout. Fixed
// order: row g before g + 8, g, slices.
constexpr int kPartStride = 80;  // >= kRows + 15 slots
template <int N>
__device__ __forceinline__ void add_strip_diagonals(float* s_part, float* s_run,
                                                    const float (&ds)[N / 8][4], int kc) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  float* slots = s_part + g * kPartStride + 2 * t - g + 7;
  __syncwarp();  // the warp's reads of the previous strip's slots are done
#pragma unroll
  for (int q = 0; q <= N / 8; ++q) {
#pragma unroll
    for (int cc = 0; cc < 2; ++cc) {
      // Row g: key 8 (q - 1) + 2 t + cc; row g + 8: key 8 q + 2 t + cc.
      slots[8 * q + cc] = q == 0       ? ds[0][2 + cc]
                          : q == N / 8 ? ds[N / 8 - 1][cc]
                                       : ds[q - 1][cc] + ds[q][2 + cc];
    }
  }
  __syncwarp();
  for (int x = lane; x < N + 15; x += 32) {
    float sum = 0.f;
#pragma unroll
    for (int r = 0; r < 8; ++r) sum += s_part[r * kPartStride + x];
    s_run[kc + x] += sum;
  }
}

// A dq block's diagonal sums to its drel_rows row, global diagonal index j - i + Tq - 1 (zeros
// for the diagonals this block never reached): block diagonal e = j - i + q0 + kM - 1 is slot
// e - (kM - 16) + 16 s of strip s's running sums (rows q0 + 16 s ...), added over s in order.
template <int kM>
__device__ __forceinline__ void store_block_diagonals(const Params& p, const float* s_run,
                                                      int run_stride, int run_len, int b, int h,
                                                      int qb) {
  const int diags = num_diagonals(p.tq, p.tk), q0 = qb * kM;
  float* row = p.drel_rows + ((int64_t(b) * p.heads + h) * gridDim.x + qb) * diags;
  for (int d = threadIdx.x; d < diags; d += kThreads) {
    const int e = d - (p.tq - 1) + q0 + kM - 1;
    float sum = 0.f;
#pragma unroll
    for (int s = 0; s < kM / 16; ++s) {
      const int x = e - (kM - 16) + 16 * s;
      if (x >= 0 && x < run_len) sum += s_run[s * run_stride + x];
    }
    row[d] = sum;
  }
}

// A block owns 64 MT queries (four warps of 16 MT rows) and takes each 64-key tile in 64 / N
// column slices (N = 32 keeps S and dP of two m-tiles in registers).
template <typename T, int D, int MT, int N, bool kDropout, bool kBias>
__global__ void __launch_bounds__(kThreads, D == 64 && MT == 1 ? 3 : 2)
    flash_dq_kernel(const Params p) {
  constexpr int kM = kRows * MT, S = tile_stride(D);
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);  // [kM, S] each
  T* sdo = sq + kM * S;
  T* skv = sdo + kM * S;  // [2 stages][K, V] of [64, S]
  const int qb = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int q0 = qb * kM, w0 = q0 + warp * 16 * MT;  // w0: the warp's first row
  // Relative buckets: [4 warps][8, kPartStride] f32 dS scratch, [kM / 16 strips][run_stride]
  // running diagonal sums, then the band of diagonal biases [kM + Tk - 1].
  const bool rel = kBias && p.bias == 2;
  const int run_stride = num_row_blocks(p.tk) * kRows + 16;
  float* s_part = reinterpret_cast<float*>(skv + 4 * kRows * S);
  float* s_run = s_part + kWarps * 8 * kPartStride;
  float* sband = s_run + kM / 16 * run_stride;
  // band[e] is diagonal j - i = e - (q0 + kM - 1).
  const Scorer sc(p, b, h, sband, q0 + kM - 1);
  const LaneRows lr = lane_rows<D>();
  const uint32_t q_rows = smem_u32(sq) + warp * 16 * MT * S * 2,
                 do_rows = smem_u32(sdo) + warp * 16 * MT * S * 2;
  const T* kg = act<T>(p.k) + int64_t(b) * p.tk * p.ldk + int64_t(h / p.group) * p.dh;
  const T* vg = act<T>(p.v) + int64_t(b) * p.tk * p.ldv + int64_t(h / p.group) * p.dh;
  // Keys past this block's last query and its queries' prefixes (causal) or past the padding
  // never matter.
  const int kv_stop =
      p.causal ? min(sc.kv_end, max(q0 + kM, warp_prefix_max(p, b, q0, kM))) : sc.kv_end;
  const int warp_prefix = warp_prefix_max(p, b, w0, 16 * MT);  // 0 without a prefix
  const int n_blocks = (kv_stop + kRows - 1) / kRows;
  const int run_len = n_blocks * kRows + 15;  // running sums a strip's slices reach
  // All read after the barrier below.
  if (rel) {
    load_rel_band(sband, p, h, p.tq - q0 - kM, kM + kv_stop - 1);
    for (int e = threadIdx.x; e < kWarps * 8 * kPartStride; e += kThreads) s_part[e] = 0.f;
    for (int e = threadIdx.x; e < kM / 16 * run_stride; e += kThreads) s_run[e] = 0.f;
  }

  load_tile<D, kM>(sq, act<T>(p.q) + int64_t(b) * p.tq * p.ldq + int64_t(h) * p.dh, p.ldq, q0, p.tq,
                   p.dh);
  load_tile<D, kM>(sdo, act<T>(p.dout) + int64_t(b) * p.tq * p.ldd + int64_t(h) * p.dh, p.ldd, q0,
                   p.tq, p.dh);
  if (n_blocks > 0) {
    load_tile<D>(skv, kg, p.ldk, 0, p.tk, p.dh);
    load_tile<D>(skv + kRows * S, vg, p.ldv, 0, p.tk, p.dh);
  }
  cp_async_commit();

  __shared__ float s_dvec[kM];
  block_rowdot<T, D, kM>(s_dvec, p, b, h, q0);
  __syncthreads();
  float lse2[MT][2], dvec[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int i = w0 + mt * 16 + g + r * 8;
      lse2[mt][r] = i < p.tq ? p.lse[(int64_t(b) * p.heads + h) * p.tq + i] * kLog2e : INFINITY;
      dvec[mt][r] = i < p.tq ? s_dvec[i - q0] : 0.f;
    }
  }
  float dq[MT][D / 8][4];
  zero(dq);
  for (int nb = 0; nb < n_blocks; ++nb) {
    const int k0 = nb * kRows;
    cp_async_wait<0>();  // K(nb), V(nb) are in
    __syncthreads();     // ... for every thread; every warp is done with the other stage
    if (nb + 1 < n_blocks) {
      T* nk = skv + ((nb + 1) & 1) * 2 * kRows * S;
      load_tile<D>(nk, kg, p.ldk, k0 + kRows, p.tk, p.dh);
      load_tile<D>(nk + kRows * S, vg, p.ldv, k0 + kRows, p.tk, p.dh);
    }
    cp_async_commit();
    const uint32_t k_tile = smem_u32(skv + (nb & 1) * 2 * kRows * S),
                   v_tile = k_tile + kRows * S * 2;
    uint32_t saved[MT] = {};  // saved keep bits of this key block, a word per m-tile
    if (kDropout && p.keep_bits != nullptr) {
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int strip0 = w0 + mt * 16;
        if (strip0 < p.tq)
          saved[mt] = __ldg(p.keep_bits + keep_word_at(p, b, h, strip0 / 16, nb, lane));
      }
    }
#pragma unroll
    for (int c0 = 0; c0 < kRows; c0 += N) {
      const int kc = k0 + c0;
      // Rows all past the end or, causal, before every key of the slice with prefixes ending at
      // or before it: nothing to add (warp-uniform; dS is 0 there, so neither to the diagonal
      // sums).
      if (w0 >= p.tq || (p.causal && kc > w0 + 16 * MT - 1 && kc >= warp_prefix)) continue;
      float s[MT][N / 8][4], dp[MT][N / 8][4];
      zero(s);
      zero(dp);
      gemm_nt<T, D, MT, N>(s, q_rows, k_tile + c0 * S * 2, lr);
      gemm_nt<T, D, MT, N>(dp, do_rows, v_tile + c0 * S * 2, lr);
      const bool full = sc.all_visible(w0, w0 + 16 * MT, kc + N);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int row_base = w0 + mt * 16 + g;
        if (full) {
          dq_scores<N, false, kDropout, kBias>(s[mt], dp[mt], sc, lse2[mt], dvec[mt], saved[mt],
                                               row_base, kc);
        } else {
          dq_scores<N, true, kDropout, kBias>(s[mt], dp[mt], sc, lse2[mt], dvec[mt], saved[mt],
                                              row_base, kc);
        }
      }
      if constexpr (kBias) {
        if (rel) {
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            add_strip_diagonals<N>(s_part + warp * 8 * kPartStride,
                                   s_run + (warp * MT + mt) * run_stride, s[mt], kc);
          }
        }
      }
      uint32_t pa[MT][N / 16][4];
      to_a_frags<T, MT, N>(pa, s);
      gemm_nn<T, D, MT, N>(dq, pa, k_tile + c0 * S * 2, lr);
    }
  }
  cp_async_wait<0>();
  store_rows<T, D, MT>(act<T>(p.dq) + int64_t(b) * p.tq * p.ld_dq + int64_t(h) * p.dh, p.ld_dq, w0,
                       p.tq, dq, p.scale_log2 / kLog2e, p.dh);
  if (rel) {
    __syncthreads();
    store_block_diagonals<kM>(p, s_run, run_stride, run_len, b, h, qb);
  }
}

// drel_diag[h, d] = sum over samples b, query blocks qb of drel_rows[b, h, qb, d]: row
// k = b blocks + qb goes to partial sum k % 4 (four loads in flight, not one chain of B blocks
// dependent adds), then ((0 + 1) + (2 + 3)). (The two reductions do not read T: they are
// templated on it so that each element type's translation unit holds its own copy.)
template <typename T>
__global__ void drel_reduce_diagonals(const Params p, int batch, int blocks) {
  const int diags = num_diagonals(p.tq, p.tk), h = blockIdx.y;
  const int d = blockIdx.x * blockDim.x + threadIdx.x;
  if (d >= diags) return;
  float part[4] = {0.f, 0.f, 0.f, 0.f};
  const int rows = batch * blocks;
  for (int k0 = 0; k0 < rows; k0 += 4) {
#pragma unroll
    for (int u = 0; u < 4; ++u) {
      const int k = k0 + u, b = k / blocks, qb = k - b * blocks;
      if (k < rows) part[u] += p.drel_rows[((int64_t(b) * p.heads + h) * blocks + qb) * diags + d];
    }
  }
  p.drel_diag[int64_t(h) * diags + d] = (part[0] + part[1]) + (part[2] + part[3]);
}

// d_rel_table[u, head_offset + h] += sum of drel_diag[h, d] over the diagonals d in bucket u.
template <typename T>
__global__ void drel_reduce_buckets(const Params p) {
  const int diags = num_diagonals(p.tq, p.tk), h = blockIdx.x;
  for (int u = threadIdx.x; u < p.num_buckets; u += blockDim.x) {
    float sum = 0.f;
    for (int d = 0; d < diags; ++d) {
      if (p.rel_buckets[d] == u) sum += p.drel_diag[int64_t(h) * diags + d];
    }
    p.d_rel_table[int64_t(u) * p.total_heads + p.head_offset + h] += sum;
  }
}

// Saved keep bits in the transposed layout (dk/dv kernel, p.keep_bits given): the words of the
// N queries from m0 (a multiple of 16) and the 16 keys from key16 (a multiple of 16) that lane
// (g, t) needs, w[a][e] for query strip m0 / 16 + a and queries m0 + 16 a + 8 x + 2 t + e:
// lane 4 (2 t + e) + g / 2 of the strip's word row (keys key16 + g + 8 y; 0 past Tq).
template <int N>
__device__ __forceinline__ void load_saved_cols(uint32_t (&w)[N / 16][2], const Params& p, int b,
                                                int h, int m0, int key16) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int a = 0; a < N / 16; ++a) {
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      w[a][e] = m0 + 16 * a < p.tq
                    ? __ldg(p.keep_bits + keep_word_at(p, b, h, m0 / 16 + a, key16 / kRows,
                                                       4 * (2 * t + e) + g / 2))
                    : 0u;
    }
  }
}
// The transposed layout's 4-bit mask of n-tile n (element c = (query + c % 2, key + 8 (c / 2)))
// from those words: bit 4 ((key16 % 64) / 8 + c / 2) + 2 (n % 2) + g % 2 of w[n / 2][c % 2].
template <int N>
__device__ __forceinline__ uint32_t saved_cols(const uint32_t (&w)[N / 16][2], int n, int key16) {
  const int g = (threadIdx.x >> 2) & 7;
  const int sh = 4 * ((key16 % kRows) / 8) + 2 * (n % 2) + g % 2;
  const uint32_t w0 = w[n / 2][0], w1 = w[n / 2][1];
  return ((w0 >> sh) & 1u) | ((w1 >> sh) & 1u) << 1 | ((w0 >> (sh + 4)) & 1u) << 2 |
         ((w1 >> (sh + 4)) & 1u) << 3;
}

// dk/dv kernel, N queries from m0: st holds K Q^T and dpt V dout^T of a warp m-tile's keys
// (rows) and the queries (columns); st becomes P' (dropped, scaled) and dpt becomes dS^T.
// slse, sdvec: the values of queries m0 ...; saved: the saved keep-bit words (load_saved_cols)
// when p.keep_bits is given, else the bits are drawn.
template <int N, bool kCheck, bool kDropout, bool kBias>
__device__ __forceinline__ void dkdv_scores(float (&st)[N / 8][4], float (&dpt)[N / 8][4],
                                            const Scorer& sc, const float* slse, const float* sdvec,
                                            const uint32_t (&saved)[N / 16][2], int key_base,
                                            int m0) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int n = 0; n < N / 8; ++n) {
    const uint32_t kept = !kDropout                   ? 0xfu
                          : sc.p.keep_bits != nullptr ? saved_cols<N>(saved, n, key_base & ~15)
                                                      : sc.keep_cols(m0 + n * 8 + 2 * t, key_base);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int col = n * 8 + 2 * t + (c & 1), i = m0 + col, j = key_base + (c >> 1) * 8;
      const float pr = ex2(sc.logit<kCheck, kBias>(st[n][c], i, j) - slse[col]);
      const float keep = !kDropout ? 1.f : ((kept >> c) & 1u) ? sc.p.keep_scale : 0.f;
      st[n][c] = pr * keep;
      dpt[n][c] = pr * (dpt[n][c] * keep - sdvec[col]);
    }
  }
}

// Which of dk, dv a dkdv kernel computes.
enum DkDvPart { kDkDv = 0, kDvOnly = 1, kDkOnly = 2 };

// A block owns 64 MT keys (four warps of 16 MT rows) and takes each 64-query tile in 64 / N
// column slices.
template <typename T, int D, int MT, int N, int kPart, bool kDropout, bool kBias>
__global__ void __launch_bounds__(kThreads, 2) flash_dkdv_kernel(const Params p) {
  constexpr int kM = kRows * MT, S = tile_stride(D);
  constexpr bool kDk = kPart != kDvOnly, kDv = kPart != kDkOnly;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sk = reinterpret_cast<T*>(smem_raw);  // [kM, S] each
  T* sv = sk + kM * S;
  T* sqd = sv + kM * S;                                         // [2 stages][Q, dout] [64, S]
  float* svec = reinterpret_cast<float*>(sqd + 4 * kRows * S);  // [2 stages][lse2, dvec][64]
  float* sband = svec + 4 * kRows;  // [kM + Tq - 1] diagonal biases (relative buckets)
  // A block owns 64 MT keys of kv head hk and sums dk, dv over the group's query heads in
  // order (grouped-query attention; group 1: h = hk).
  const int kb = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2;
  const int k0 = kb * kM;
  const LaneRows lr = lane_rows<D>();
  const uint32_t k_rows = smem_u32(sk) + warp * 16 * MT * S * 2,
                 v_rows = smem_u32(sv) + warp * 16 * MT * S * 2;
  load_tile<D, kM>(sk, act<T>(p.k) + int64_t(b) * p.tk * p.ldk + int64_t(hk) * p.dh, p.ldk, k0,
                   p.tk, p.dh);
  if (kDk) {  // the dv kernel reads no V
    load_tile<D, kM>(sv, act<T>(p.v) + int64_t(b) * p.tk * p.ldv + int64_t(hk) * p.dh, p.ldv, k0,
                     p.tk, p.dh);
  }
  const int key0 = k0 + warp * 16 * MT;  // the warp's first key
  float dk[MT][D / 8][4], dv[MT][D / 8][4];
  zero(dk);
  zero(dv);
  for (int h = hk * p.group; h < (hk + 1) * p.group; ++h) {
    if (h > hk * p.group) __syncthreads();  // every warp is done with the previous head's tiles
    // band[e] is diagonal j - i = e + k0 - (Tq - 1): key k0, query Tq - 1 at e = 0.
    const Scorer sc(p, b, h, sband, p.tq - 1 - k0);
    // Read after the loop's first barrier (relative buckets: group 1 only).
    if (kBias && p.bias == 2) load_rel_band(sband, p, h, k0, kM + p.tq - 1);
    const T* qg = act<T>(p.q) + int64_t(b) * p.tq * p.ldq + int64_t(h) * p.dh;
    const T* dg = act<T>(p.dout) + int64_t(b) * p.tq * p.ldd + int64_t(h) * p.dh;
    const float* lse_g = p.lse + (int64_t(b) * p.heads + h) * p.tq;
    const float* dvec_g = p.dvec + (int64_t(b) * p.heads + h) * p.tq;
    // Query blocks that can see a key of this block: causal ones start at the diagonal or at the
    // first query whose prefix reaches past k0.
    const int m_first = (p.causal ? warp_first_query(p, b, k0) : 0) / kRows;
    const int m_blocks = k0 < sc.kv_end ? (p.tq + kRows - 1) / kRows : 0;

    if (m_first < m_blocks) {
      load_tile<D>(sqd, qg, p.ldq, m_first * kRows, p.tq, p.dh);
      load_tile<D>(sqd + kRows * S, dg, p.ldd, m_first * kRows, p.tq, p.dh);
    }
    cp_async_commit();

    for (int mb = m_first; mb < m_blocks; ++mb) {
      const int m0 = mb * kRows, stage = (mb - m_first) & 1;
      const T* sq = sqd + stage * 2 * kRows * S;
      const uint32_t q_tile = smem_u32(sq), do_tile = q_tile + kRows * S * 2;
      float* slse = svec + stage * 2 * kRows;
      float* sdvec = slse + kRows;
      // This stage's vectors were last read two iterations ago, before the previous barrier.
      for (int r = threadIdx.x; r < kRows; r += kThreads) {
        const bool ok = m0 + r < p.tq;
        slse[r] = ok ? lse_g[m0 + r] * kLog2e : INFINITY;
        sdvec[r] = ok ? dvec_g[m0 + r] : 0.f;
      }
      cp_async_wait<0>();  // Q(mb), dout(mb) are in
      __syncthreads();     // ... for every thread; every warp is done with the other stage
      if (mb + 1 < m_blocks) {
        T* nq = sqd + (stage ^ 1) * 2 * kRows * S;
        load_tile<D>(nq, qg, p.ldq, m0 + kRows, p.tq, p.dh);
        load_tile<D>(nq + kRows * S, dg, p.ldd, m0 + kRows, p.tq, p.dh);
      }
      cp_async_commit();
#pragma unroll
      for (int c0 = 0; c0 < kRows; c0 += N) {
        const int mc = m0 + c0;
        // Keys all padding, or (causal) after every query of the slice and at or past their
        // prefixes: nothing to add (warp-uniform).
        if (key0 >= sc.kv_end || mc >= p.tq) continue;
        if (p.causal && key0 > mc + N - 1 && warp_prefix_max(p, b, mc, N) <= key0) continue;
        float st[MT][N / 8][4], dpt[MT][N / 8][4];  // rows: the warp's keys; columns: queries
        zero(st);
        zero(dpt);
        gemm_nt<T, D, MT, N>(st, k_rows, q_tile + c0 * S * 2, lr);
        if constexpr (kDk) gemm_nt<T, D, MT, N>(dpt, v_rows, do_tile + c0 * S * 2, lr);
        const bool full = !sc.segmented && key0 + 16 * MT <= sc.kv_end &&
                          (!p.causal || key0 + 16 * MT - 1 <= mc) && mc + N <= p.tq;
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int key_base = key0 + mt * 16 + g;  // keys key_base and key_base + 8
          uint32_t saved[N / 16][2] = {};
          if (kDropout && p.keep_bits != nullptr) {
            load_saved_cols<N>(saved, p, b, h, mc, key0 + mt * 16);
          }
          if (full) {
            dkdv_scores<N, false, kDropout, kBias>(st[mt], dpt[mt], sc, slse + c0, sdvec + c0,
                                                   saved, key_base, mc);
          } else {
            dkdv_scores<N, true, kDropout, kBias>(st[mt], dpt[mt], sc, slse + c0, sdvec + c0, saved,
                                                  key_base, mc);
          }
        }
        uint32_t pa[MT][N / 16][4];
        if constexpr (kDv) {
          to_a_frags<T, MT, N>(pa, st);
          gemm_nn<T, D, MT, N>(dv, pa, do_tile + c0 * S * 2, lr);
        }
        if constexpr (kDk) {
          to_a_frags<T, MT, N>(pa, dpt);
          gemm_nn<T, D, MT, N>(dk, pa, q_tile + c0 * S * 2, lr);
        }
      }
    }
  }
  cp_async_wait<0>();
  if constexpr (kDk) {
    store_rows<T, D, MT>(act<T>(p.dk) + int64_t(b) * p.tk * p.ld_dk + int64_t(hk) * p.dh, p.ld_dk,
                         key0, p.tk, dk, p.scale_log2 / kLog2e, p.dh);
  }
  if constexpr (kDv) {
    store_rows<T, D, MT>(act<T>(p.dv) + int64_t(b) * p.tk * p.ld_dv + int64_t(hk) * p.dh, p.ld_dv,
                         key0, p.tk, dv, 1.f, p.dh);
  }
}

template <typename Kernel>
void set_smem(Kernel kernel, size_t bytes) {
  ANVIL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(bytes)));
}

// Block shapes (m-tiles per warp, column slice) per tile width, chosen by registers: two m-tiles
// with 32-wide slices for Dh 64, one with whole tiles for Dh 128 (and 96); the Dh 64 dq with bias
// and dropout takes one m-tile (H200, T5-base shapes, relative buckets: encoder 512 forward +
// backward 2.69 ms with one, 2.79 with two; decoder 114 causal 0.37 / 0.43; without dropout two
// m-tiles are faster: 0.76 / 0.81 ms). Widths 192 and 256: one m-tile, 32-wide slices, dk and
// dv in two kernels. ptxas (sm_90, CUDA 13.0), bf16, no dropout (dropout spills 0.1-1.1 KB more
// in every kernel):
//   dq   Dh 64 MT 2 N 32: 248-249 registers, smem 64 KiB;  Dh 128 MT 1: 246-247, 96 KiB;
//        Dh 64 MT 1 (bias and dropout): 168, 48 KiB
//   dkdv Dh 64 MT 2 N 32: 255 + 48-108 bytes spilled, 65 KiB;  Dh 128 MT 1: 255 + 76-140 bytes
//        spilled, 97 KiB
// (relative buckets add 4 8 80 + 4 MT (64 ceil(Tk / 64) + 16) + 64 MT + Tk f32 to the dq smem
// and 64 MT + Tq f32 to the dkdv smem).
template <typename T, int D, bool kDropout, bool kBias>
struct Backward {
  static constexpr int kDqMT = D == 64 && !(kBias && kDropout) ? 2 : 1,
                       kDqN = kDqMT == 2 || D > 128 ? 32 : kRows;
  static constexpr int kKvMT = D == 64 ? 2 : 1, kKvN = kKvMT == 2 || D > 128 ? 32 : kRows;
  static constexpr bool kSplit = D > 128;

  template <int kPart>
  static void launch_dkdv(const Params& p, int batch, size_t smem, cudaStream_t stream) {
    auto* kernel = flash_dkdv_kernel<T, D, kKvMT, kKvN, kPart, kDropout, kBias>;
    set_smem(kernel, smem);
    const int rows = kRows * kKvMT;
    kernel<<<dim3((p.tk + rows - 1) / rows, p.heads / p.group, batch), kThreads, smem, stream>>>(p);
    ANVIL_CUDA_CHECK(cudaGetLastError());
  }

  static void launch(const Params& p, int batch, cudaStream_t stream) {
    const size_t tile = kRows * tile_stride(D) * sizeof(T);
    const bool rel = p.bias == 2;
    // Relative buckets: dq's dS scratch, running diagonal sums and band; dkdv's band.
    const size_t dq_rel =
        rel ? (kWarps * 8 * kPartStride + 4 * kDqMT * (num_row_blocks(p.tk) * kRows + 16) +
               band_floats(kRows * kDqMT, p.tk)) *
                  sizeof(float)
            : 0;
    const size_t kv_rel = rel ? band_floats(kRows * kKvMT, p.tq) * sizeof(float) : 0;
    const size_t dq_smem = (2 * kDqMT + 4) * tile + dq_rel;
    const size_t dkdv_smem = (2 * kKvMT + 4) * tile + 4 * kRows * sizeof(float) + kv_rel;
    ANVIL_CHECK_MSG(std::max(dq_smem, dkdv_smem) <= kMaxSmemPerBlock,
                    "flash_attention_backward: relative buckets with " + std::to_string(p.tq) +
                        " x " + std::to_string(p.tk) + " scores need " +
                        std::to_string(std::max(dq_smem, dkdv_smem)) +
                        " bytes of shared memory per block (at most " +
                        std::to_string(kMaxSmemPerBlock) + " on sm_90)");
    auto* dq = flash_dq_kernel<T, D, kDqMT, kDqN, kDropout, kBias>;
    set_smem(dq, dq_smem);
    const int dq_rows = kRows * kDqMT;
    const int dq_blocks = (p.tq + dq_rows - 1) / dq_rows;
    dq<<<dim3(dq_blocks, p.heads, batch), kThreads, dq_smem, stream>>>(p);
    ANVIL_CUDA_CHECK(cudaGetLastError());
    if constexpr (kSplit) {
      launch_dkdv<kDvOnly>(p, batch, dkdv_smem, stream);
      launch_dkdv<kDkOnly>(p, batch, dkdv_smem, stream);
    } else {
      launch_dkdv<kDkDv>(p, batch, dkdv_smem, stream);
    }
    if (rel) {
      const int diags = num_diagonals(p.tq, p.tk);
      drel_reduce_diagonals<T>
          <<<dim3((diags + 63) / 64, p.heads), 64, 0, stream>>>(p, batch, dq_blocks);
      ANVIL_CUDA_CHECK(cudaGetLastError());
      drel_reduce_buckets<T><<<p.heads, 128, 0, stream>>>(p);
      ANVIL_CUDA_CHECK(cudaGetLastError());
    }
  }
};

}  // namespace anvil::ops::cuda::flash
