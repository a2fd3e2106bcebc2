// CUDA forward of ops/flash_attention.h (FlashAttention-2 schedule on mma.sync):
// a block owns 64 MT queries of one (sample, head), four warps of 16 MT rows; it walks the
// visible key blocks of 64 (causal: up to its diagonal or its queries' largest prefix_end;
// padding: up to kv_lengths[b]) with an
// online softmax in log2 units:
//   x_ij = (scale q_i.k_j + bias) log2(e);  m_i = running max;  l_i += sum_j 2^(x_ij - m_i)
//   acc_i = acc_i 2^(m_old - m_new) + sum_j 2^(x_ij - m_i) keep_ij v_j
//   out_i = acc_i / l_i / (1 - p)  (=),  lse_i = (m_i + log2 l_i) ln 2  (=; +inf, out 0 if empty)
// K and V are double-buffered: block nb + 1 loads (cp.async) while block nb is computed.
// Relative buckets: the block's band of diagonal biases (kM + Tk - 1 f32) is in smem.
// Dropout with p.keep_bits: each warp writes its keep bits, a word per 16-row strip and 64-key
// block (the saved mask the backward kernels read).
// Templated on the element type T and the tile width D (ops/cuda/flash_attention_tiles.cuh);
// flash_attention_forward_{bf16,f16}.cu compile one element type each.
#pragma once

#include <string>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/cuda/flash_attention_launch.h"
#include "ops/cuda/flash_attention_tiles.cuh"

namespace anvil::ops::cuda::flash {

// One slice of N keys from k0, online-softmax update of a warp m-tile's two rows per thread: s
// holds the raw dot products Q K^T and becomes the (dropped) probabilities 2^(x - m) for P V;
// acc and l are rescaled by 2^(m_old - m_new). Dropout: the slice's keep bits go into kbits at
// bit 4 ((k0 % 64) / 8 + n) + c (the saved-mask word of the thread's strip, |=).
template <int D, int N, bool kCheck, bool kDropout, bool kBias>
__device__ __forceinline__ void softmax_update(float (&s)[N / 8][4], float (&acc)[D / 8][4],
                                               float (&m_run)[2], float (&l_run)[2],
                                               uint32_t& kbits, const Scorer& sc, int row_base,
                                               int k0) {
  const int t = threadIdx.x & 3;
  float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
  for (int n = 0; n < N / 8; ++n) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int i = row_base + (c >> 1) * 8, j = k0 + n * 8 + 2 * t + (c & 1);
      s[n][c] = sc.logit<kCheck, kBias>(s[n][c], i, j);
      m_new[c >> 1] = fmaxf(m_new[c >> 1], s[n][c]);
    }
  }
  float m_use[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
    m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
    m_use[r] = m_new[r] == -INFINITY ? 0.f : m_new[r];  // a row with nothing visible yet
    const float alpha = ex2(m_run[r] - m_use[r]);
    m_run[r] = m_new[r];
    l_run[r] *= alpha;
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      acc[n][2 * r] *= alpha;
      acc[n][2 * r + 1] *= alpha;
    }
  }
#pragma unroll
  for (int n = 0; n < N / 8; ++n) {
    const uint32_t kept = kDropout ? sc.keep_rows(row_base, k0 + n * 8 + 2 * t) : 0xfu;
    if (kDropout) kbits |= kept << (4 * ((k0 % kRows) / 8 + n));
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const float e = ex2(s[n][c] - m_use[c >> 1]);
      l_run[c >> 1] += e;
      s[n][c] = kDropout && !((kept >> c) & 1u) ? 0.f : e;
    }
  }
}

// A block owns 64 MT rows (four warps of 16 MT rows) and takes each 64-key tile in 64 / N
// slices (N = 32 keeps S of two m-tiles small beside a Dh 128 accumulator).
template <typename T, int D, int MT, int N, bool kDropout, bool kBias>
__global__ void __launch_bounds__(kThreads, D == 64 && MT == 1 && !kDropout ? 4 : 2)
    flash_forward_kernel(const Params p) {
  constexpr int kM = kRows * MT, S = tile_stride(D);
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* sq = reinterpret_cast<T*>(smem_raw);                        // [kM, S]
  T* skv = sq + kM * S;                                          // [2 stages][K, V] of [64, S]
  float* sband = reinterpret_cast<float*>(skv + 4 * kRows * S);  // [kM + Tk - 1] (bias 2)
  const int qb = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int q0 = qb * kM, w0 = q0 + warp * 16 * MT;  // w0: the warp's first row
  // band[e] is diagonal j - i = e - (q0 + kM - 1): row q0 + kM - 1, key 0 at e = 0.
  const Scorer sc(p, b, h, sband, q0 + kM - 1);
  const LaneRows lr = lane_rows<D>();
  const uint32_t q_rows = smem_u32(sq) + warp * 16 * MT * S * 2;
  const T* qg = act<T>(p.q) + int64_t(b) * p.tq * p.ldq + int64_t(h) * p.dh;
  const T* kg = act<T>(p.k) + int64_t(b) * p.tk * p.ldk + int64_t(h / p.group) * p.dh;
  const T* vg = act<T>(p.v) + int64_t(b) * p.tk * p.ldv + int64_t(h / p.group) * p.dh;
  // Keys past this block's last query and its queries' prefixes (causal) or past the padding
  // never matter.
  const int kv_stop =
      p.causal ? min(sc.kv_end, max(q0 + kM, warp_prefix_max(p, b, q0, kM))) : sc.kv_end;
  const int warp_prefix = warp_prefix_max(p, b, w0, 16 * MT);  // 0 without a prefix
  const int n_blocks = (kv_stop + kRows - 1) / kRows;
  // Read after the loop's first barrier.
  if (kBias && p.bias == 2) load_rel_band(sband, p, h, p.tq - q0 - kM, kM + kv_stop - 1);

  load_tile<D, kM>(sq, qg, p.ldq, q0, p.tq, p.dh);
  if (n_blocks > 0) {
    load_tile<D>(skv, kg, p.ldk, 0, p.tk, p.dh);
    load_tile<D>(skv + kRows * S, vg, p.ldv, 0, p.tk, p.dh);
  }
  cp_async_commit();

  float acc[MT][D / 8][4];
  zero(acc);
  float m_run[MT][2], l_run[MT][2];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
    m_run[mt][0] = m_run[mt][1] = -INFINITY;
    l_run[mt][0] = l_run[mt][1] = 0.f;
  }

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
    uint32_t kbits[MT] = {};  // this key block's keep bits, a word per m-tile (saved mask)
#pragma unroll
    for (int c0 = 0; c0 < kRows; c0 += N) {
      const int kc = k0 + c0;
      // A warp whose rows are all past the end or, causal, before every key of the slice and
      // with prefixes ending at or before it has nothing to add (warp-uniform).
      if (w0 >= p.tq || (p.causal && kc > w0 + 16 * MT - 1 && kc >= warp_prefix)) continue;
      float s[MT][N / 8][4];
      zero(s);
      gemm_nt<T, D, MT, N>(s, q_rows, k_tile + c0 * S * 2, lr);
      const bool full = sc.all_visible(w0, w0 + 16 * MT, kc + N);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int row_base = w0 + mt * 16 + g;  // rows row_base and row_base + 8
        if (full) {
          softmax_update<D, N, false, kDropout, kBias>(s[mt], acc[mt], m_run[mt], l_run[mt],
                                                       kbits[mt], sc, row_base, kc);
        } else {
          softmax_update<D, N, true, kDropout, kBias>(s[mt], acc[mt], m_run[mt], l_run[mt],
                                                      kbits[mt], sc, row_base, kc);
        }
      }
      uint32_t pa[MT][N / 16][4];
      to_a_frags<T, MT, N>(pa, s);
      gemm_nn<T, D, MT, N>(acc, pa, v_tile + c0 * S * 2, lr);
    }
    if (kDropout && p.keep_bits != nullptr) {
      // Every visible element's bit: a visible (i, j) is in a block this loop reaches and in a
      // slice its warp does not skip (rows past Tq have no word).
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        const int strip0 = w0 + mt * 16;
        if (strip0 < p.tq) p.keep_bits[keep_word_at(p, b, h, strip0 / 16, nb, lane)] = kbits[mt];
      }
    }
  }
  cp_async_wait<0>();

#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float l = l_run[mt][r];
      l += __shfl_xor_sync(0xffffffffu, l, 1);
      l += __shfl_xor_sync(0xffffffffu, l, 2);
      const int i = w0 + mt * 16 + g + r * 8;
      if (i >= p.tq) continue;
      const bool empty = l == 0.f;
      const float inv = empty ? 0.f : p.keep_scale / l;
      store_row<T, D>(act<T>(p.o) + (int64_t(b) * p.tq + i) * p.ldo + int64_t(h) * p.dh, acc[mt], r,
                      inv, p.dh);
      if (t == 0) {
        p.lse[(int64_t(b) * p.heads + h) * p.tq + i] =
            empty ? INFINITY : (m_run[mt][r] + __log2f(l)) * 0.6931471805599453f;
      }
    }
  }
}

// Block shape (m-tiles per warp MT, key slice N) per tile width and mask, chosen by the H200
// timings of docs/performance.md (64, 128) and by registers (the others). ptxas (sm_90, CUDA
// 13.0), bf16, no dropout:
//   Dh 64 causal, MT 1 N 64: 128 registers (four blocks per SM; with dropout two), smem 40 KiB
//   Dh 64, MT 2 N 64: 235-244 registers, no spills, smem 48 KiB
//   Dh 128, MT 2 N 32: 254 registers, no spills, smem 96 KiB
// dropout adds Philox state and spills a few hundred bytes in each. Width 96 takes 128's shape
// (its smem too: rows of 128); 192 and 256 one m-tile (their accumulators alone take 96 and
// 128 registers), 160 and 192 KiB of smem, one block per SM at 256.
template <typename T, int D, int MT, int N, bool kDropout, bool kBias>
void launch_shape(const Params& p, int batch, cudaStream_t stream) {
  const size_t band = p.bias == 2 ? band_floats(kRows * MT, p.tk) * sizeof(float) : 0;
  const size_t smem = (MT + 4) * kRows * tile_stride(D) * sizeof(T) + band;
  ANVIL_CHECK_MSG(smem <= kMaxSmemPerBlock, "flash_attention_forward: relative buckets with " +
                                                std::to_string(p.tk) + " keys need " +
                                                std::to_string(smem) +
                                                " bytes of shared memory per block (at most " +
                                                std::to_string(kMaxSmemPerBlock) + " on sm_90)");
  auto* kernel = flash_forward_kernel<T, D, MT, N, kDropout, kBias>;
  ANVIL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                        static_cast<int>(smem)));
  const dim3 grid((p.tq + kRows * MT - 1) / (kRows * MT), p.heads, batch);
  kernel<<<grid, kThreads, smem, stream>>>(p);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

template <typename T, int D, bool kDropout, bool kBias>
struct Forward {
  static void launch(const Params& p, int batch, cudaStream_t stream) {
    if constexpr (D == 64) {
      // Causal Dh 64 ran 12% slower with 128-row blocks (eight warps per SM instead of 16).
      p.causal ? launch_shape<T, D, 1, 64, kDropout, kBias>(p, batch, stream)
               : launch_shape<T, D, 2, 64, kDropout, kBias>(p, batch, stream);
    } else if constexpr (D <= 128) {
      launch_shape<T, D, 2, 32, kDropout, kBias>(p, batch, stream);
    } else {
      launch_shape<T, D, 1, 32, kDropout, kBias>(p, batch, stream);
    }
  }
};

}  // namespace anvil::ops::cuda::flash
