// CUDA forward of ops/flash_attention.h on Hopper (sm_90a only), FlashAttention-3's technique:
// out (=) and lse (=) from q, k, v exactly as flash_attention_forward.cuh computes them (online
// softmax in log2 units, empty rows give out 0 and lse +inf), with the tensor cores fed by TMA.
// A block owns 128 queries of one (sample, head) and three warpgroups of 128 threads:
//   warpgroup 0, the producer: one thread loads the Q tile, then every visible K and V tile of
//     128 keys through TMA (128-byte swizzled boxes of 64 columns) into a three-stage ring, each
//     stage's K and V completing on their own mbarrier; it reuses a stage once both consumers
//     have arrived on its "empty" barrier.
//   warpgroups 1 and 2, the consumers, 64 queries each: S = Q K^T with wgmma (both operands in
//     shared memory), masking and the online softmax in registers, P rounded to bf16 in
//     registers, O += P V with wgmma (P from registers, V read N-major from shared memory);
//     tile n's S = Q K^T is issued together with tile n - 1's P V, and tile n's softmax runs
//     while that P V computes (FlashAttention-3's intra-warpgroup overlap).
// The producer gives its registers to the consumers (setmaxnreg 24 / 240).
// Takes bf16, head size 64 or 128, no bias, no dropout (documents, key padding, causal,
// cross-attention lengths and grouped-query heads in the kernel); ops/cuda/flash_attention.cu
// sends everything else to the mma.sync kernels. Not yet done: FA3's ping-pong scheduling of
// the two consumer warpgroups, the O store through shared memory and TMA.
// Compiled for sm_90a alone (CMakeLists.txt: *_sm90a.cu); the tensor maps are encoded on the
// host through the driver's cuTensorMapEncodeTiled, found at run time (no libcuda link).
#include <cuda.h>
#include <cudaTypedefs.h>

#include <string>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/cuda/flash_attention_forward.cuh"
#include "ops/cuda/flash_attention_launch.h"
#include "ops/cuda/hopper_primitives.cuh"

namespace anvil::ops::cuda::flash {
namespace {

constexpr int kBlockM = 128;   // queries of a block: two consumer warpgroups of 64
constexpr int kBlockN = 128;   // keys of a pipeline stage
constexpr int kStages = 3;     // K/V ring depth
constexpr int kAtomCols = 64;  // bf16 columns of one 128-byte swizzled row
constexpr int kAtomRowBytes = 128;
constexpr int kSm90aThreads = 384;

// Shared memory of width D: Q [D / 64 atom columns][128 rows][128 B], K and V stages alike,
// then the barriers; each tile starts on a 1024-byte boundary (the swizzle's period).
template <int D>
struct Sm90aSmem {
  static constexpr int kAtoms = D / kAtomCols;
  static constexpr int kQBytes = kAtoms * kBlockM * kAtomRowBytes;
  static constexpr int kKvBytes = kAtoms * kBlockN * kAtomRowBytes;
  static constexpr int kBarOffset = kQBytes + 2 * kStages * kKvBytes;
  static constexpr int kBars = 1 + 3 * kStages;  // q_full, k_full[], v_full[], empty[]
  static constexpr int kBytes = kBarOffset + kBars * 8 + 1024;  // + alignment of the base
};

// One tile's online-softmax step of a warp's two rows per thread, the O rescale left to the
// caller (O is still being accumulated by the previous tile's P V when this runs): s holds the
// raw dot products Q K^T and becomes 2^(x - m_new); l = l alpha + rowsum; alpha[r] =
// 2^(m_old - m_new) (0 for a row with nothing visible yet, whose O and l are 0 anyway).
template <bool kCheck>
__device__ __forceinline__ void softmax_step(float (&s)[kBlockN / 8][4], float (&m_run)[2],
                                             float (&l_run)[2], float (&alpha)[2], const Scorer& sc,
                                             int row_base, int k0) {
  const int t = threadIdx.x & 3;
  float m_new[2] = {m_run[0], m_run[1]};
#pragma unroll
  for (int n = 0; n < kBlockN / 8; ++n) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int i = row_base + (c >> 1) * 8, j = k0 + n * 8 + 2 * t + (c & 1);
      s[n][c] = sc.logit<kCheck, false>(s[n][c], i, j);
      m_new[c >> 1] = fmaxf(m_new[c >> 1], s[n][c]);
    }
  }
  float m_use[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 1));
    m_new[r] = fmaxf(m_new[r], __shfl_xor_sync(0xffffffffu, m_new[r], 2));
    m_use[r] = m_new[r] == -INFINITY ? 0.f : m_new[r];
    alpha[r] = ex2(m_run[r] - m_use[r]);
    m_run[r] = m_new[r];
    l_run[r] *= alpha[r];
  }
#pragma unroll
  for (int n = 0; n < kBlockN / 8; ++n) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      s[n][c] = ex2(s[n][c] - m_use[c >> 1]);
      l_run[c >> 1] += s[n][c];
    }
  }
}

// S = Q K^T of one stage (issued, not waited for).
template <int D>
__device__ __forceinline__ void issue_qk(float (&s)[kBlockN / 8][4], uint32_t q_rows,
                                         uint32_t k_tile) {
  constexpr uint32_t kAtomTile = kBlockN * kAtomRowBytes;
#pragma unroll
  for (int a = 0; a < D / kAtomCols; ++a) {
#pragma unroll
    for (int kk = 0; kk < kAtomCols / 16; ++kk) {
      hopper::wgmma_ss<kBlockN>(
          s, hopper::sw128_desc(q_rows + a * kBlockM * kAtomRowBytes + kk * 32, 16, 1024),
          hopper::sw128_desc(k_tile + a * kAtomTile + kk * 32, 16, 1024), a + kk > 0);
    }
  }
  hopper::wgmma_commit();
}

// O += P V of one stage (issued, not waited for); V is read N-major: 8 keys per 1024 bytes, its
// 64-column atom blocks kBlockN * 128 bytes apart.
template <int D>
__device__ __forceinline__ void issue_pv(float (&o)[D / 8][4],
                                         const uint32_t (&pa)[1][kBlockN / 16][4],
                                         uint32_t v_tile) {
#pragma unroll
  for (int kk = 0; kk < kBlockN / 16; ++kk) {
    hopper::wgmma_rs_tn<D>(
        o, pa[0][kk],
        hopper::sw128_desc(v_tile + kk * 16 * kAtomRowBytes, kBlockN * kAtomRowBytes, 1024));
  }
  hopper::wgmma_commit();
}

// Consumer warpgroup cw (0, 1): rows q0 + 64 cw + [0, 64) of the block. FlashAttention-3's
// intra-warpgroup overlap: tile nb's S = Q K^T and tile nb - 1's O += P V are in flight
// together, and the softmax of tile nb runs while P V still computes; O is rescaled once that
// product has landed.
template <int D>
__device__ __forceinline__ void consume(const Params& p, int b, int h, int q0, int n_blocks, int cw,
                                        uint32_t sq, uint32_t sk, uint32_t sv, uint64_t* q_full,
                                        uint64_t* k_full, uint64_t* v_full, uint64_t* empty) {
  using L = Sm90aSmem<D>;
  const int warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  const int w0 = q0 + cw * 64 + warp * 16;  // the warp's first row
  const int row_base = w0 + g;              // the thread's rows: row_base and row_base + 8
  const Scorer sc(p, b, h);
  float o[D / 8][4];
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.f, 0.f}, alpha[2];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  const uint32_t q_rows = sq + cw * 64 * kAtomRowBytes;
  uint32_t pa[1][kBlockN / 16][4];  // P of the previous tile, bf16 A fragments

  hopper::mbar_wait(q_full, 0);
  for (int nb = 0; nb < n_blocks; ++nb) {
    const int stage = nb % kStages, prev = (nb + kStages - 1) % kStages;
    const uint32_t phase = (nb / kStages) & 1, prev_phase = ((nb - 1) / kStages) & 1;
    const int k0 = nb * kBlockN;
    float s[1][kBlockN / 8][4];
    hopper::mbar_wait(k_full + stage, phase);
    hopper::fence_regs(o);
    hopper::wgmma_fence();
    issue_qk<D>(s[0], q_rows, sk + stage * L::kKvBytes);
    if (nb > 0) {
      hopper::mbar_wait(v_full + prev, prev_phase);
      issue_pv<D>(o, pa, sv + prev * L::kKvBytes);
      hopper::wgmma_wait<1>();  // S is in; P V may still run
    } else {
      hopper::wgmma_wait<0>();
    }
    hopper::fence_regs(s[0]);
    if (sc.all_visible(w0, w0 + 16, k0 + kBlockN)) {
      softmax_step<false>(s[0], m_run, l_run, alpha, sc, row_base, k0);
    } else {
      softmax_step<true>(s[0], m_run, l_run, alpha, sc, row_base, k0);
    }
    if (nb > 0) {
      hopper::wgmma_wait<0>();
      hopper::fence_regs(o);
      hopper::mbar_arrive(empty + prev);  // this thread is done with tile nb - 1's K and V
    }
#pragma unroll
    for (int n = 0; n < D / 8; ++n) {
      o[n][0] *= alpha[0], o[n][1] *= alpha[0], o[n][2] *= alpha[1], o[n][3] *= alpha[1];
    }
    to_a_frags<bf16, 1, kBlockN>(pa, s);
  }
  if (n_blocks > 0) {
    const int last = (n_blocks - 1) % kStages;
    hopper::mbar_wait(v_full + last, ((n_blocks - 1) / kStages) & 1);
    hopper::fence_regs(o);
    hopper::wgmma_fence();
    issue_pv<D>(o, pa, sv + last * L::kKvBytes);
    hopper::wgmma_wait<0>();
    hopper::fence_regs(o);
    hopper::mbar_arrive(empty + last);
  }

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int i = w0 + g + r * 8;
    if (i >= p.tq) continue;
    const bool none = l == 0.f;
    const float inv = none ? 0.f : 1.f / l;
    store_row<bf16, D>(act<bf16>(p.o) + (int64_t(b) * p.tq + i) * p.ldo + int64_t(h) * p.dh, o, r,
                       inv, p.dh);
    if (t == 0) {
      p.lse[(int64_t(b) * p.heads + h) * p.tq + i] =
          none ? INFINITY : (m_run[r] + __log2f(l)) * 0.6931471805599453f;
    }
  }
}

template <int D>
__global__ void __launch_bounds__(kSm90aThreads, 1)
    flash_forward_sm90a_kernel(const __grid_constant__ CUtensorMap tm_q,
                               const __grid_constant__ CUtensorMap tm_k,
                               const __grid_constant__ CUtensorMap tm_v, const Params p) {
  using L = Sm90aSmem<D>;
  extern __shared__ unsigned char smem_raw[];
  const uint32_t raw = hopper::smem_addr(smem_raw);
  unsigned char* base = smem_raw + ((1024 - (raw & 1023)) & 1023);
  unsigned char* sq = base;
  unsigned char* sk = base + L::kQBytes;  // stage s at sk + s * kKvBytes
  unsigned char* sv = sk + kStages * L::kKvBytes;
  uint64_t* q_full = reinterpret_cast<uint64_t*>(base + L::kBarOffset);
  uint64_t* k_full = q_full + 1;
  uint64_t* v_full = k_full + kStages;
  uint64_t* empty = v_full + kStages;

  const int qb = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int q0 = qb * kBlockM;
  const int kv_end = p.kv_lengths ? max(0, min(p.tk, p.kv_lengths[b])) : p.tk;
  // Keys past this block's last query (causal) or past the padding never matter.
  const int kv_stop = p.causal ? min(kv_end, q0 + kBlockM) : kv_end;
  const int n_blocks = (kv_stop + kBlockN - 1) / kBlockN;

  if (threadIdx.x == 0) {
    hopper::mbar_init(q_full, 1);
    for (int s = 0; s < kStages; ++s) {
      hopper::mbar_init(k_full + s, 1);
      hopper::mbar_init(v_full + s, 1);
      hopper::mbar_init(empty + s, 2 * 128);  // every consumer thread arrives
    }
    hopper::mbar_init_fence();
  }
  __syncthreads();

  if (threadIdx.x < 128) {  // producer warpgroup: one thread issues every copy
    hopper::regs_dealloc<24>();
    if (threadIdx.x == 0) {
      const int kvh = h / p.group;
      hopper::mbar_arrive_expect_tx(q_full, L::kQBytes);
      for (int a = 0; a < L::kAtoms; ++a) {
        hopper::tma_load_4d(sq + a * kBlockM * kAtomRowBytes, &tm_q, q_full, a * kAtomCols, h, q0,
                            b);
      }
      for (int nb = 0; nb < n_blocks; ++nb) {
        const int stage = nb % kStages;
        if (nb >= kStages) hopper::mbar_wait(empty + stage, ((nb / kStages) - 1) & 1);
        unsigned char* kt = sk + stage * L::kKvBytes;
        unsigned char* vt = sv + stage * L::kKvBytes;
        hopper::mbar_arrive_expect_tx(k_full + stage, L::kKvBytes);
        for (int a = 0; a < L::kAtoms; ++a) {
          hopper::tma_load_4d(kt + a * kBlockN * kAtomRowBytes, &tm_k, k_full + stage,
                              a * kAtomCols, kvh, nb * kBlockN, b);
        }
        hopper::mbar_arrive_expect_tx(v_full + stage, L::kKvBytes);
        for (int a = 0; a < L::kAtoms; ++a) {
          hopper::tma_load_4d(vt + a * kBlockN * kAtomRowBytes, &tm_v, v_full + stage,
                              a * kAtomCols, kvh, nb * kBlockN, b);
        }
      }
    }
  } else {
    hopper::regs_alloc<240>();
    consume<D>(p, b, h, q0, n_blocks, threadIdx.x / 128 - 1, hopper::smem_addr(sq),
               hopper::smem_addr(sk), hopper::smem_addr(sv), q_full, k_full, v_full, empty);
  }
}

PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult found{};
    ANVIL_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000,
                                                      cudaEnableDefault, &found));
    ANVIL_CHECK_MSG(found == cudaDriverEntryPointSuccess && f != nullptr,
                    "flash_attention_forward: the CUDA driver has no cuTensorMapEncodeTiled "
                    "(needed by the sm_90a kernel)");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// The tensor map of one activation view: heads of dh columns in rows of ld elements, `rows`
// rows per sample; boxes of 64 columns x 1 head x box_rows rows x 1 sample, 128-byte swizzled,
// zero-filled out of bounds (rows past a sample's end read as 0, never the next sample).
CUtensorMap tensor_map(const void* x, int dh, int heads, int rows, int batch, int64_t ld,
                       int box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[4] = {cuuint64_t(dh), cuuint64_t(heads), cuuint64_t(rows),
                              cuuint64_t(batch)};
  const cuuint64_t strides[3] = {cuuint64_t(dh) * 2, cuuint64_t(ld) * 2,
                                 cuuint64_t(rows) * cuuint64_t(ld) * 2};
  const cuuint32_t box[4] = {kAtomCols, 1, cuuint32_t(box_rows), 1};
  const cuuint32_t elem_strides[4] = {1, 1, 1, 1};
  const CUresult r = tensor_map_encoder()(
      &m, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 4, const_cast<void*>(x), dims, strides, box,
      elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
      CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  ANVIL_CHECK_MSG(r == CUDA_SUCCESS, "flash_attention_forward: cuTensorMapEncodeTiled failed (" +
                                         std::to_string(static_cast<int>(r)) + ")");
  return m;
}

template <int D>
void launch_sm90a(const Params& p, int batch, cudaStream_t stream) {
  const CUtensorMap tq = tensor_map(p.q, p.dh, p.heads, p.tq, batch, p.ldq, kBlockM);
  const CUtensorMap tk = tensor_map(p.k, p.dh, p.heads / p.group, p.tk, batch, p.ldk, kBlockN);
  const CUtensorMap tv = tensor_map(p.v, p.dh, p.heads / p.group, p.tk, batch, p.ldv, kBlockN);
  auto* kernel = flash_forward_sm90a_kernel<D>;
  constexpr int kSmem = Sm90aSmem<D>::kBytes;
  ANVIL_CUDA_CHECK(
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  const dim3 grid((p.tq + kBlockM - 1) / kBlockM, p.heads, batch);
  kernel<<<grid, kSm90aThreads, kSmem, stream>>>(tq, tk, tv, p);
  ANVIL_CUDA_CHECK(cudaGetLastError());
}

bool aligned16(const void* x) { return reinterpret_cast<uintptr_t>(x) % 16 == 0; }

}  // namespace

bool forward_sm90a_supports(const Params& p) {
  // Bidirectional prefixes (prefix-LM, packed MTF) are not in this kernel's visible-tile walk.
  if ((p.dh != 64 && p.dh != 128) || p.bias != 0 || p.dropout_p != 0.f || p.prefix_end) {
    return false;
  }
  // TMA: 16-byte aligned bases and row strides.
  if (!aligned16(p.q) || !aligned16(p.k) || !aligned16(p.v) || p.ldq % 8 != 0 || p.ldk % 8 != 0 ||
      p.ldv % 8 != 0) {
    return false;
  }
  int device = 0, major = 0, minor = 0;
  ANVIL_CUDA_CHECK(cudaGetDevice(&device));
  ANVIL_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  ANVIL_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major == 9 && minor == 0;  // sm_90a code runs on compute capability 9.0 only
}

void forward_sm90a_bf16(const Params& p, int batch, cudaStream_t stream) {
  if (p.dh == 64) {
    launch_sm90a<64>(p, batch, stream);
  } else {
    launch_sm90a<128>(p, batch, stream);
  }
}

}  // namespace anvil::ops::cuda::flash
