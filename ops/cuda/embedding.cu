// CUDA token + learned position embedding, wte holding vocabulary rows
// [vocab_start, vocab_start + vocab) (vocab-parallel: other ids give a zero row / no gradient):
//   forward : out[t, :] = [tokens[t] in shard] wte[tokens[t] - vocab_start, :]
//                         + (wpe given ? wpe[positions[t], :] : 0)                        (=)
//   backward: dwte[tokens[t] - vocab_start, :] += dout[t, :] for tokens in the shard;
//             dwpe[positions[t], :] += dout[t, :] when dwpe is given                     (+=)
// Forward: one thread per V consecutive elements of a row (16-byte accesses when dim and the
// pointers allow, else scalar). Sums in f32, rounded once to the activation type.
// Backward, deterministic: (id, t) pairs are sorted by id with a stable CUB radix sort (scratch
// in the stream's GEMM workspace), then one warp per run of equal ids adds the run's dout rows
// to the destination row in token order, starting from the row's value: the CPU twin's exact
// f32 order, so both give bitwise equal results. Positions (dwpe) take a second sort. Without
// enough workspace it falls back to an f32 atomicAdd scatter (not bitwise reproducible).
#include <algorithm>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "engine/cuda_check.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/embedding.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

// Row of wte holding token `id`, or -1 when the id lies outside [vocab_start, vocab_start + vocab).
__device__ __forceinline__ int64_t local_row(int32_t id, int64_t vocab_start, int64_t vocab) {
  const int64_t row = static_cast<int64_t>(id) - vocab_start;
  return row >= 0 && row < vocab ? row : -1;
}

// out: [n, dim] T; tokens: [n] i32; positions: [n] i32 (unread when wpe is null);
// wte: [vocab, dim] T; wpe: [max_pos, dim] T or null.
// Thread i handles elements [c, c + V) of row t, where t = i / (dim / V), c = (i % (dim / V)) V.
template <typename T, int V>
__global__ void embedding_fwd_kernel_vec(T* out, const int32_t* tokens, const int32_t* positions,
                                         const T* wte, const T* wpe, int64_t n, int64_t dim,
                                         int64_t vocab_start, int64_t vocab) {
  const int64_t chunks = dim / V;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * chunks) return;
  const int64_t t = i / chunks;
  const int64_t c = (i - t * chunks) * V;
  const int64_t row = local_row(tokens[t], vocab_start, vocab);
  float acc[V];
#pragma unroll
  for (int k = 0; k < V; ++k) acc[k] = 0.0f;
  if (row >= 0) {
    const Packed<T, V> a = load_packed<V>(wte + row * dim + c);
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] = to_f32(a.v[k]);
  }
  if (wpe != nullptr) {
    const Packed<T, V> b = load_packed<V>(wpe + static_cast<int64_t>(positions[t]) * dim + c);
#pragma unroll
    for (int k = 0; k < V; ++k) acc[k] += to_f32(b.v[k]);
  }
  Packed<T, V> o;
#pragma unroll
  for (int k = 0; k < V; ++k) o.v[k] = from_f32<T>(acc[k]);
  store_packed<V>(out + t * dim + c, o);
}

// dwte: [vocab, dim] f32 (+=); dwpe: [max_pos, dim] f32 (+=) or null; dout: [n, dim] T;
// tokens: [n] i32; positions: [n] i32 (unread when dwpe is null).
template <typename T, int V>
__global__ void embedding_bwd_kernel_atomic_scatter(float* dwte, float* dwpe, const T* dout,
                                                    const int32_t* tokens, const int32_t* positions,
                                                    int64_t n, int64_t dim, int64_t vocab_start,
                                                    int64_t vocab) {
  const int64_t chunks = dim / V;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * chunks) return;
  const int64_t t = i / chunks;
  const int64_t c = (i - t * chunks) * V;
  const int64_t row = local_row(tokens[t], vocab_start, vocab);
  if (row < 0 && dwpe == nullptr) return;  // nothing to add: skip the dout read
  const Packed<T, V> g = load_packed<V>(dout + t * dim + c);
  float* te = row >= 0 ? dwte + row * dim + c : nullptr;
  float* pe = dwpe != nullptr ? dwpe + static_cast<int64_t>(positions[t]) * dim + c : nullptr;
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float v = to_f32(g.v[k]);
    if (te != nullptr) atomicAdd(te + k, v);
    if (pe != nullptr) atomicAdd(pe + k, v);
  }
}

// order[k] = k for k < n.
__global__ void iota_kernel(int32_t* order, int64_t n) {
  for (int64_t k = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; k < n;
       k += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    order[k] = static_cast<int32_t>(k);
  }
}

// ids: [n] sorted ids; order: [n] their token indices (stable: increasing within a run);
// dst: [rows, dim] f32 (+=) holding ids [row_start, row_start + rows). The warp of sorted index
// k handles the run starting at k: dst[id] = (((dst[id] + dout[t0]) + dout[t1]) + ...).
template <typename T>
__global__ void embedding_bwd_sorted_runs(float* dst, const T* dout, const int32_t* ids,
                                          const int32_t* order, int64_t n, int64_t dim,
                                          int64_t row_start, int64_t rows) {
  const int64_t k = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (k >= n) return;
  const int32_t id = ids[k];
  if (k > 0 && ids[k - 1] == id) return;  // inside a run: its first warp owns it
  const int64_t row = static_cast<int64_t>(id) - row_start;
  if (row < 0 || row >= rows) return;
  int64_t end = k + 1;
  while (end < n && ids[end] == id) ++end;
  float* d = dst + row * dim;
  for (int64_t c = lane; c < dim; c += 32) {
    float acc = d[c];
#pragma unroll 4
    for (int64_t m = k; m < end; ++m) acc += to_f32(dout[static_cast<int64_t>(order[m]) * dim + c]);
    d[c] = acc;
  }
}

int64_t blocks_for(int64_t threads) { return ceil_div(threads, kThreads); }

// Scratch of one sorted pass carved from the GEMM workspace: sorted keys, token indices before
// and after the sort, and CUB's temporary storage; empty views when it does not fit.
struct SortScratch {
  int32_t *keys_out = nullptr, *order_in = nullptr, *order_out = nullptr;
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

SortScratch sort_scratch(int64_t n, const engine::Workspace& ws) {
  SortScratch s;
  const size_t arr = static_cast<size_t>(n) * sizeof(int32_t), aligned = (arr + 255) / 256 * 256;
  ANVIL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, s.temp_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n));
  if (ws.data == nullptr || 3 * aligned + s.temp_bytes > ws.bytes) return SortScratch{};
  char* base = static_cast<char*>(ws.data);
  s.keys_out = reinterpret_cast<int32_t*>(base);
  s.order_in = reinterpret_cast<int32_t*>(base + aligned);
  s.order_out = reinterpret_cast<int32_t*>(base + 2 * aligned);
  s.temp = base + 3 * aligned;
  return s;
}

// dst[ids[t] - row_start] += dout[t] for ids in [row_start, row_start + rows), deterministically.
template <typename T>
void sorted_scatter(float* dst, const T* dout, const int32_t* ids, int64_t n, int64_t dim,
                    int64_t row_start, int64_t rows, const SortScratch& s, cudaStream_t stream) {
  iota_kernel<<<static_cast<unsigned>(std::min<int64_t>(ceil_div(n, kThreads), 1024)), kThreads, 0,
                stream>>>(s.order_in, n);
  size_t temp_bytes = s.temp_bytes;
  ANVIL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(s.temp, temp_bytes, ids, s.keys_out, s.order_in,
                                                   s.order_out, n, 0,
                                                   static_cast<int>(sizeof(int32_t) * 8), stream));
  embedding_bwd_sorted_runs<T>
      <<<static_cast<unsigned>(ceil_div(n * 32, kThreads)), kThreads, 0, stream>>>(
          dst, dout, s.keys_out, s.order_out, n, dim, row_start, rows);
}

}  // namespace

void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream) {
  if (args.tokens == 0) return;
  // An empty wpe has data == nullptr, which the kernel reads as "no position term".
  dispatch_act<true>(out.dtype, "cuda::embedding_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = args.dim % kV == 0 && aligned_to(16, {out.data, wte.data, wpe.data});
    const int64_t threads = args.tokens * (vec ? args.dim / kV : args.dim);
    if (vec) {
      embedding_fwd_kernel_vec<T, kV><<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
          out.as<T>(), tokens.as<int32_t>(), positions.as<int32_t>(), wte.as<T>(), wpe.as<T>(),
          args.tokens, args.dim, args.vocab_start, args.vocab);
    } else {
      embedding_fwd_kernel_vec<T, 1><<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
          out.as<T>(), tokens.as<int32_t>(), positions.as<int32_t>(), wte.as<T>(), wpe.as<T>(),
          args.tokens, args.dim, args.vocab_start, args.vocab);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream) {
  if (args.tokens == 0) return;
  const SortScratch scratch = sort_scratch(args.tokens, stream.gemm_workspace());
  // An empty dwpe has data == nullptr, which the kernel reads as "no position gradient".
  dispatch_act<true>(dout.dtype, "cuda::embedding_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    if (scratch.temp != nullptr) {
      sorted_scatter<T>(dwte.as<float>(), dout.as<T>(), tokens.as<int32_t>(), args.tokens, args.dim,
                        args.vocab_start, args.vocab, scratch, stream.cuda_stream());
      if (!dwpe.empty()) {
        sorted_scatter<T>(dwpe.as<float>(), dout.as<T>(), positions.as<int32_t>(), args.tokens,
                          args.dim, 0, dwpe.dim(0), scratch, stream.cuda_stream());
      }
      return;
    }
    constexpr int kV = kVec16<T>;
    const bool vec = args.dim % kV == 0 && aligned_to(16, {dout.data});
    const int64_t threads = args.tokens * (vec ? args.dim / kV : args.dim);
    if (vec) {
      embedding_bwd_kernel_atomic_scatter<T, kV>
          <<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
              dwte.as<float>(), dwpe.as<float>(), dout.as<T>(), tokens.as<int32_t>(),
              positions.as<int32_t>(), args.tokens, args.dim, args.vocab_start, args.vocab);
    } else {
      embedding_bwd_kernel_atomic_scatter<T, 1>
          <<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
              dwte.as<float>(), dwpe.as<float>(), dout.as<T>(), tokens.as<int32_t>(),
              positions.as<int32_t>(), args.tokens, args.dim, args.vocab_start, args.vocab);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
