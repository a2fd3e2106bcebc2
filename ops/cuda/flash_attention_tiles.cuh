// Warp-level building blocks of the flash attention kernels (ops/cuda/flash_attention_*.cu):
// bf16 or f16 (T) tiles of R rows x D in shared memory (16-byte chunks XOR-swizzled by row, so
// ldmatrix is conflict-free), cp.async loads, and the two warp GEMM shapes on mma.sync m16n8k16,
// over
// MT m-tiles of 16 rows per warp (MT = 2 reuses every B fragment read from smem twice, which
// halves the shared-memory traffic per MMA: with one m-tile, ldmatrix bandwidth bounds them):
//   gemm_nt: acc[16 MT x N] += A[16 MT x D] (smem rows) * B[N x D]^T (smem rows)  (S = Q K^T)
//   gemm_nn: acc[16 MT x D] += P[16 MT x K] (registers) * B[K x D] (smem rows)    (O = P V)
// Accumulator layout of m16n8k16 (g = lane / 4, t = lane % 4): acc[mt][n][c] is row
// 16 mt + g + 8 (c / 2), column 8 n + 2 t + c % 2 of the warp's tile.
// Also the per-element score rule shared by the forward and both backward kernels.
// Head sizes: D is a tile width of kTileWidths (tile_width), the true head size p.dh <= D a
// multiple of 8. Loads zero-fill the columns [dh, D), so Q K^T and the products over them are
// exact, and stores skip them. A tile row is tile_stride(D) elements (a multiple of 64, which
// the 8-chunk swizzle needs); only its first D columns are read or written.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "engine/philox.h"
#include "ops/flash_attention_detail.h"

namespace anvil::ops::cuda::flash {

using bf16 = __nv_bfloat16;
using f16 = __half;

constexpr int kRows = 64;  // rows of a streamed tile (keys of an iteration, queries of dk/dv)
constexpr int kWarps = 4;  // 16 MT rows each: a block owns 64 MT rows
constexpr int kThreads = kWarps * 32;
constexpr float kLog2e = 1.4426950408889634f;
constexpr size_t kMaxSmemPerBlock = 227 * 1024;  // sm_90 opt-in maximum

// Tile widths compiled; a head size runs in the smallest that holds it.
__host__ __device__ constexpr int tile_width(int dh) {
  return dh <= 64 ? 64 : dh <= 96 ? 96 : dh <= 128 ? 128 : dh <= 192 ? 192 : 256;
}
// Elements per smem tile row: D rounded up to 64 (8 chunks of 16 bytes for the swizzle).
__host__ __device__ constexpr int tile_stride(int d) { return (d + 63) / 64 * 64; }

// Everything the kernels read; pointers are offset per (b, h) inside the kernels. The
// activations are T (bf16 or f16), cast by the kernels (act<T>).
struct Params {
  const void *q, *k, *v, *out, *dout;
  void *o, *dq, *dk, *dv;
  float* lse;                       // [B, H, Tq] natural log
  float* dvec;                      // [B, H, Tq] rowsum(dout * out) (backward)
  int64_t ldq, ldk, ldv, ldo, ldd;  // rows of q, k, v, out/o, dout
  int64_t ld_dq, ld_dk, ld_dv;
  int tq, tk, heads, total_heads, head_offset;
  int group;  // query heads per kv head (grouped-query): head h reads k, v head h / group
  int dh;     // true head size (a multiple of 8, <= the tile width); head h at columns h * dh
  bool causal;
  int bias;          // AttentionBias as int
  float scale_log2;  // scale * log2(e)
  const int32_t *seg_q, *seg_k, *kv_lengths, *rel_buckets;
  const int32_t* prefix_end;    // [B*Tq] keys j < prefix_end[b*Tq + i] visible (causal), or null
  const float* rel_table;       // [num_buckets, total_heads]
  float dropout_p, keep_scale;  // keep_scale = 1 / (1 - p)
  uint64_t seed, offset;
  // Saved keep bits (ops/flash_attention_detail.h keep_word / keep_bit), or null: forward writes
  // them, backward reads them instead of drawing Philox.
  uint32_t* keep_bits;
  // Relative-bucket backward (bias == 2): per dq block sums of dS along each diagonal j - i,
  // [B, H, dq blocks (<= ceil(Tq / 64)), Tq + Tk - 1]; their sum over blocks and samples
  // [H, Tq + Tk - 1];
  // the learned table's gradient [num_buckets, total_heads] (+=).
  float *drel_rows, *drel_diag, *d_rel_table;
  int num_buckets;
};

template <typename T>
__host__ __device__ inline const T* act(const void* x) {
  return static_cast<const T*>(x);
}
template <typename T>
__host__ __device__ inline T* act(void* x) {
  return static_cast<T*>(x);
}

// Diagonals j - i of a Tq x Tk score matrix, indexed by j - i + Tq - 1.
__host__ __device__ inline int num_diagonals(int tq, int tk) { return tq + tk - 1; }
__host__ __device__ inline int num_row_blocks(int rows) { return (rows + kRows - 1) / kRows; }

// Shared-memory element offset of (row, col) in a tile of rows of S elements (S a multiple of
// 64); col a multiple of 8 picks the 16-byte chunk, whose low three bits are XORed with row % 8.
template <int S>
__device__ __forceinline__ int swz(int row, int col) {
  static_assert(S % 64 == 0, "the swizzle permutes groups of 8 chunks");
  return row * S + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const uint32_t s = static_cast<uint32_t>(__cvta_generic_to_shared(smem));
  const int bytes = valid ? 16 : 0;  // 0: zero-fill (rows past the end)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Rows [row0, row0 + R) of a row-strided [rows, dh] global matrix into columns [0, D) of an
// [R, tile_stride(D)] tile; rows >= rows and columns >= dh are zero-filled.
template <int D, int R = kRows, typename T>
__device__ __forceinline__ void load_tile(T* tile, const T* g, int64_t ld, int row0, int rows,
                                          int dh) {
  constexpr int kChunks = D / 8;
#pragma unroll
  for (int idx = threadIdx.x; idx < R * kChunks; idx += kThreads) {
    const int r = idx / kChunks, c = (idx % kChunks) * 8;
    const bool ok = row0 + r < rows && c < dh;
    cp_async16(tile + swz<tile_stride(D)>(r, c), g + (ok ? (row0 + r) * ld + c : 0), ok);
  }
}

// Values of rows [row0, row0 + 64) of a [rows] f32 vector into smem (0 past the end).
__device__ __forceinline__ void load_vec(float* dst, const float* src, int row0, int rows) {
  for (int r = threadIdx.x; r < kRows; r += kThreads)
    dst[r] = row0 + r < rows ? src[row0 + r] : 0.f;
}

// c[4] += a[4] (16x16 row) * (b0, b1) (16x8 col), T in, f32 accumulate.
template <typename T>
__device__ __forceinline__ void mma16816(float (&c)[4], const uint32_t (&a)[4], uint32_t b0,
                                         uint32_t b1) {
  if constexpr (std::is_same_v<T, bf16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, f16>, "bf16 or f16");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Two f32 as a T pair (round to nearest), and back.
template <typename T>
__device__ __forceinline__ auto pair_of(float lo, float hi) {
  if constexpr (std::is_same_v<T, bf16>) {
    return __floats2bfloat162_rn(lo, hi);
  } else {
    return __floats2half2_rn(lo, hi);
  }
}
__device__ __forceinline__ float2 to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
__device__ __forceinline__ float2 to_float2(__half2 v) { return __half22float2(v); }

template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  const auto v = pair_of<T>(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// Columns [0, dh) of a warp accumulator row (8 n + 2 t + {0, 1}, n < D / 8) to row `g` of T.
template <typename T, int D>
__device__ __forceinline__ void store_row(T* g, const float (&acc)[D / 8][4], int r, float s,
                                          int dh) {
  const int t = threadIdx.x & 3;
#pragma unroll
  for (int n = 0; n < D / 8; ++n) {
    if (n * 8 >= dh) break;  // dh is a multiple of 8: a whole fragment column is in or out
    *reinterpret_cast<decltype(pair_of<T>(0.f, 0.f))*>(g + n * 8 + 2 * t) =
        pair_of<T>(acc[n][2 * r] * s, acc[n][2 * r + 1] * s);
  }
}

template <int MT, int N>
__device__ __forceinline__ void zero(float (&acc)[MT][N][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int n = 0; n < N; ++n) acc[mt][n][0] = acc[mt][n][1] = acc[mt][n][2] = acc[mt][n][3] = 0.f;
  }
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// A lane's ldmatrix row addresses in [R, D] tiles. Every row offset the fragments add is a
// multiple of 8, so a lane's rows all have row % 8 = lane % 8 and the swizzled chunk of logical
// chunk 2 k + c is (c ^ lane % 8) ^ 2 k: one XOR with a constant per k-step.
struct LaneRows {
  uint32_t row_lo;    // byte offset of row (l & 7) + ((l >> 3) & 1) * 8 (A of nt, B of nn)
  uint32_t row_hi;    // byte offset of row (l & 7) + (l >> 4) * 8 (B of nt)
  uint32_t chunk_hi;  // (l >> 4) ^ (l & 7)
  uint32_t chunk_lo;  // ((l >> 3) & 1) ^ (l & 7)
};

template <int D>
__device__ __forceinline__ LaneRows lane_rows() {
  constexpr uint32_t kRowBytes = tile_stride(D) * 2;
  const uint32_t l = threadIdx.x & 31;
  return {((l & 7) + ((l >> 3) & 1) * 8) * kRowBytes, ((l & 7) + (l >> 4) * 8) * kRowBytes,
          (l >> 4) ^ (l & 7), ((l >> 3) & 1) ^ (l & 7)};
}

__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t a) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(a));
}

// acc [16 MT x N] += A[16 MT rows from a_rows, 0 .. D) * B[0 .. N, 0 .. D)^T; a_rows is the smem
// address of the warp's first A row, b_tile of B's first row (tiles of tile_stride(D) columns).
template <typename T, int D, int MT, int N>
__device__ __forceinline__ void gemm_nt(float (&acc)[MT][N / 8][4], uint32_t a_rows,
                                        uint32_t b_tile, const LaneRows& lr) {
  constexpr uint32_t kRowBytes = tile_stride(D) * 2;
#pragma unroll
  for (uint32_t kk = 0; kk < D / 16; ++kk) {
    uint32_t a[MT][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      ldsm_x4(a[mt], a_rows + mt * 16 * kRowBytes + lr.row_lo + ((lr.chunk_hi ^ (2 * kk)) << 4));
    }
    const uint32_t b_col = (lr.chunk_lo ^ (2 * kk)) << 4;
#pragma unroll
    for (uint32_t np = 0; np < N / 16; ++np) {
      uint32_t b[4];
      ldsm_x4(b, b_tile + np * 16 * kRowBytes + lr.row_hi + b_col);
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(acc[mt][2 * np], a[mt], b[0], b[1]);
        mma16816<T>(acc[mt][2 * np + 1], a[mt], b[2], b[3]);
      }
    }
  }
}

// The [16 MT x K] accumulator as T A fragments of K / 16 k-steps (P, dS).
template <typename T, int MT, int K>
__device__ __forceinline__ void to_a_frags(uint32_t (&pa)[MT][K / 16][4],
                                           const float (&acc)[MT][K / 8][4]) {
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int kk = 0; kk < K / 16; ++kk) {
      pa[mt][kk][0] = pack2<T>(acc[mt][2 * kk][0], acc[mt][2 * kk][1]);
      pa[mt][kk][1] = pack2<T>(acc[mt][2 * kk][2], acc[mt][2 * kk][3]);
      pa[mt][kk][2] = pack2<T>(acc[mt][2 * kk + 1][0], acc[mt][2 * kk + 1][1]);
      pa[mt][kk][3] = pack2<T>(acc[mt][2 * kk + 1][2], acc[mt][2 * kk + 1][3]);
    }
  }
}

// acc [16 MT x D] += P[16 MT x K] (A fragments) * B[0 .. K, 0 .. D) (b_tile: B's first row).
template <typename T, int D, int MT, int K>
__device__ __forceinline__ void gemm_nn(float (&acc)[MT][D / 8][4],
                                        const uint32_t (&pa)[MT][K / 16][4], uint32_t b_tile,
                                        const LaneRows& lr) {
  constexpr uint32_t kRowBytes = tile_stride(D) * 2;
#pragma unroll
  for (uint32_t kk = 0; kk < K / 16; ++kk) {
#pragma unroll
    for (uint32_t dp = 0; dp < D / 16; ++dp) {
      uint32_t b[4];
      ldsm_x4_trans(b, b_tile + kk * 16 * kRowBytes + lr.row_lo + ((lr.chunk_hi ^ (2 * dp)) << 4));
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        mma16816<T>(acc[mt][2 * dp], pa[mt][kk], b[0], b[1]);
        mma16816<T>(acc[mt][2 * dp + 1], pa[mt][kk], b[2], b[3]);
      }
    }
  }
}

// 2^x with flush-to-zero (2^-inf = 0), one MUFU instruction.
__device__ __forceinline__ float ex2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

// Relative buckets: the bias of head h along diagonals [d0, d0 + n) (index j - i + Tq - 1) in
// log2 units, 0 outside [0, Tq + Tk - 1), into smem band[0, n). Done once per block, so the
// score loops read one shared float per element instead of a bucket and then the table entry
// it names from global memory (two dependent loads). Same f32 product as the per-element rule.
__device__ __forceinline__ void load_rel_band(float* band, const Params& p, int h, int d0, int n) {
  const int diags = num_diagonals(p.tq, p.tk);
  for (int e = threadIdx.x; e < n; e += kThreads) {
    const int d = d0 + e;
    band[e] =
        d >= 0 && d < diags
            ? p.rel_table[int64_t(p.rel_buckets[d]) * p.total_heads + p.head_offset + h] * kLog2e
            : 0.f;
  }
}

// Floats of a band over the diagonals of `rows` x `cols` elements, rounded to 16 bytes.
__host__ __device__ inline int band_floats(int rows, int cols) {
  return (rows + cols - 1 + 3) / 4 * 4;
}

// The score rule of one (sample, head): visibility, bias and dropout of element (i, j).
struct Scorer {
  const Params& p;
  int b, h;           // sample, head of this call
  int kv_end;         // keys >= kv_end are padding
  bool segmented;     // seg_q / seg_k given
  float slope_log2;   // ALiBi slope of this head, log2 units
  const float* band;  // relative buckets: bias of diagonal j - i at band[j - i + band_shift]
  int band_shift;

  __device__ Scorer(const Params& params, int b_, int h_, const float* band_ = nullptr,
                    int band_shift_ = 0)
      : p(params),
        b(b_),
        h(h_),
        kv_end(params.kv_lengths ? min(params.tk, params.kv_lengths[b_]) : params.tk),
        segmented(params.seg_q != nullptr),
        slope_log2(params.bias == 1
                       ? detail::alibi_slope_of(params.head_offset + h_, params.total_heads) *
                             kLog2e
                       : 0.f),
        band(band_),
        band_shift(band_shift_) {}

  __device__ bool visible(int i, int j) const {
    return i < p.tq && j < kv_end &&
           (!p.causal || j <= i ||
            (p.prefix_end != nullptr && j < p.prefix_end[int64_t(b) * p.tq + i])) &&
           (!segmented || p.seg_q[int64_t(b) * p.tq + i] == p.seg_k[int64_t(b) * p.tk + j]);
  }
  // True when every (i, j) in [i0, i1) x [j0, j1) is visible, so no per-element test is needed
  // (the prefix only adds visible keys, so the causal test stays sufficient).
  __device__ bool all_visible(int i0, int i1, int j1) const {
    return !segmented && i1 <= p.tq && j1 <= kv_end && (!p.causal || j1 - 1 <= i0);
  }
  // The log2-unit logit of raw dot product s (-inf where not visible, when kCheck).
  template <bool kCheck, bool kBias>
  __device__ float logit(float s, int i, int j) const {
    if (kCheck && !visible(i, j)) return -INFINITY;
    if (!kBias || p.bias == 0) return s * p.scale_log2;  // bias 0: generic (kBias) kernels
    if (p.bias == 1) return fmaf(s, p.scale_log2, slope_log2 * static_cast<float>(j));
    return fmaf(s, p.scale_log2, band[j - i + band_shift]);
  }
  // Dropout masks of a thread's four accumulator elements: bit c set when element c is kept
  // (all set without dropout; the generic kDropout kernels run with p = 0 too). One Philox call
  // gives the words of four consecutive elements e = row * Tk + key (word e % 4 of counter
  // offset + e / 4). When Tk % 4 == 0, keys 4 s .. 4 s + 3 of a row are one call, which the
  // lanes holding them share as 4-bit masks (a call per four elements instead of one per
  // element); else each element draws its own. Call with the whole warp.
  //
  // Row layout (forward and dq kernels): element c is (i + 8 (c / 2), j + c % 2), with i the
  // thread's row (g of the m-tile) and j = 8 n + 2 t + a multiple of 8. Lanes t = 2 s and
  // 2 s + 1 hold keys 4 s .. 4 s + 3 of rows i and i + 8: the even lane draws row i's call, the
  // odd one row i + 8's, and they swap the halves the other holds.
  __device__ uint32_t keep_rows(int i, int j) const {
    if (p.dropout_p == 0.f) return 0xfu;
    uint32_t k = 0;
    if (p.tk % 4 != 0) {
#pragma unroll
      for (int c = 0; c < 4; ++c) k |= keep(i + (c >> 1) * 8, j + (c & 1)) << c;
      return k;
    }
    const int u = threadIdx.x & 1;  // j % 4 == 2 u
    const uint32_t m = quad(i + 8 * u, j - 2 * u);
    const uint32_t other = __shfl_xor_sync(0xffffffffu, m, 1);
    return u ? ((other >> 2) & 3u) | (m & 12u) : (m & 3u) | ((other & 3u) << 2);
  }
  // Transposed layout (dk/dv kernel): element c is (query i + c % 2, key j + 8 (c / 2)), with j
  // the thread's key (g of the m-tile) and i = 8 n + 2 t + a multiple of 8. The lanes g = 4 a +
  // q (same t) hold keys 4 a .. 4 a + 3 (and + 8) of the same queries: lane q draws the call of
  // element c = q, and bit q of lane c's mask is element c of lane q.
  __device__ uint32_t keep_cols(int i, int j) const {
    if (p.dropout_p == 0.f) return 0xfu;
    uint32_t k = 0;
    if (p.tk % 4 != 0) {
#pragma unroll
      for (int c = 0; c < 4; ++c) k |= keep(i + (c & 1), j + (c >> 1) * 8) << c;
      return k;
    }
    const int q = (threadIdx.x >> 2) & 3;  // j % 4
    const uint32_t m = quad(i + (q & 1), j - q + (q >> 1) * 8);
#pragma unroll
    for (int r = 0; r < 4; ++r) {  // lane q ^ r drew element q ^ r's call
      const uint32_t got = r == 0 ? m : __shfl_xor_sync(0xffffffffu, m, 4 * r);
      k |= ((got >> q) & 1u) << (q ^ r);
    }
    return k;
  }

 private:
  __device__ uint32_t keep(int i, int j) const {
    return engine::philox_uniform_at(p.seed, p.offset, element(i, j)) >= p.dropout_p;
  }
  __device__ uint64_t element(int i, int j) const {
    return ((uint64_t(b) * p.total_heads + p.head_offset + h) * p.tq + i) * uint64_t(p.tk) + j;
  }
  // Bit c set when element (i, j + c) is kept, j a multiple of 4 (Tk % 4 == 0: one call).
  __device__ uint32_t quad(int i, int j) const {
    const engine::Philox4 r = engine::philox_block_at(p.seed, p.offset, element(i, j));
    uint32_t m = 0;
#pragma unroll
    for (int c = 0; c < 4; ++c) m |= uint32_t(engine::philox_uniform(r.v[c]) >= p.dropout_p) << c;
    return m;
  }
};

// Saved keep bits: the word of 16-query strip `strip`, 64-key group `group` and lane `lane` of
// (sample b, head h), the layout of ops/flash_attention_detail.h (keep_word).
__device__ __forceinline__ int64_t keep_word_at(const Params& p, int b, int h, int strip, int group,
                                                int lane) {
  return ((int64_t(b) * p.heads + h) * ((p.tq + 15) / 16) + strip) * ((p.tk + 63) / 64) * 32 +
         int64_t(group) * 32 + lane;
}

// Largest prefix_end over queries [i0, i0 + n) of sample b, in every lane of the warp (0
// without a prefix; rows past Tq count 0). Causal tile skipping keeps a key tile from j0 when
// j0 <= the last query or j0 < this maximum. Call with the whole warp.
__device__ __forceinline__ int warp_prefix_max(const Params& p, int b, int i0, int n) {
  if (p.prefix_end == nullptr) return 0;
  int v = 0;
  for (int r = threadIdx.x & 31; r < n; r += 32) {
    if (i0 + r < p.tq) v = max(v, p.prefix_end[int64_t(b) * p.tq + i0 + r]);
  }
  return __reduce_max_sync(0xffffffffu, v);
}

// First query of sample b that sees a key >= k0 (causal with a prefix): min(k0, the first i
// with prefix_end[i] > k0), in every lane of the warp. Call with the whole warp.
__device__ __forceinline__ int warp_first_query(const Params& p, int b, int k0) {
  if (p.prefix_end == nullptr) return k0;
  int first = k0;
  for (int i = threadIdx.x & 31; i < min(k0, p.tq); i += 32) {
    if (p.prefix_end[int64_t(b) * p.tq + i] > k0) {
      first = i;
      break;
    }
  }
  return __reduce_min_sync(0xffffffffu, first);
}

// Calls Kernel<T, D, kDropout, kBias>::launch(p, batch, stream) for the runtime flags of p. The
// tuned bf16 widths 64 and 128 compile every pair of flags, so their common case (no dropout, no
// bias) carries no per-element branches; every other width and f16 compile only the generic
// kDropout = kBias = true kernels, which test p's dropout and bias per element (uniform
// branches; the Philox state's registers are held either way), a fifth of the kernels to
// compile on the build machine's two cores.
template <typename T, int D, template <typename, int, bool, bool> class Kernel>
void launch_for_features(const Params& p, int batch, cudaStream_t stream) {
  if constexpr (std::is_same_v<T, bf16> && (D == 64 || D == 128)) {
    const bool bias = p.bias != 0;
    if (p.dropout_p > 0.f) {
      bias ? Kernel<T, D, true, true>::launch(p, batch, stream)
           : Kernel<T, D, true, false>::launch(p, batch, stream);
    } else {
      bias ? Kernel<T, D, false, true>::launch(p, batch, stream)
           : Kernel<T, D, false, false>::launch(p, batch, stream);
    }
  } else {
    Kernel<T, D, true, true>::launch(p, batch, stream);
  }
}

// Runs Kernel for p's element type and the tile width of p.dh.
template <template <typename, int, bool, bool> class Kernel, typename T>
void launch_for_width(const Params& p, int batch, cudaStream_t stream) {
  switch (tile_width(p.dh)) {
    case 64:
      return launch_for_features<T, 64, Kernel>(p, batch, stream);
    case 96:
      return launch_for_features<T, 96, Kernel>(p, batch, stream);
    case 128:
      return launch_for_features<T, 128, Kernel>(p, batch, stream);
    case 192:
      return launch_for_features<T, 192, Kernel>(p, batch, stream);
    default:
      return launch_for_features<T, 256, Kernel>(p, batch, stream);
  }
}

}  // namespace anvil::ops::cuda::flash
