// CUDA token + learned position embedding, wte holding vocabulary rows
// [vocab_start, vocab_start + vocab) (vocab-parallel: other ids give a zero row / no gradient):
//   forward : out[t, :] = [tokens[t] in shard] wte[tokens[t] - vocab_start, :]
//                         + (wpe given ? wpe[positions[t], :] : 0)                        (=)
//   backward: dwte[tokens[t] - vocab_start, :] += dout[t, :] for tokens in the shard;
//             dwpe[positions[t], :] += dout[t, :] when dwpe is given                     (+=)
// Forward: one thread per V consecutive elements of a row (16-byte accesses when dim and the
// pointers allow, else scalar). Sums in f32, rounded once to the activation type.
// Backward, deterministic: (id, t) pairs are sorted by id with a stable CUB radix sort (scratch
// in the stream's GEMM workspace), and the sorted positions are cut into chunks of kChunk. A
// chunk's blocks walk its segments (the parts of runs of equal ids inside it) column by column
// in token order. A run inside one chunk is added onto the destination row, starting from the
// row's value: the CPU twin's exact f32 order, bitwise equal. A run crossing chunks (a frequent
// id: [PAD], [MASK], BERT's token types, T5's padding) leaves one f32 partial sum per chunk in
// scratch, and a second kernel adds them in chunk order: dst += ((s0 + s1) + ...), a different
// association from the CPU's (f32 rounding apart) but fixed, so run to run bitwise reproducible.
// (One warp per whole run was serial in the run length: 26 ms for BERT-large's token types.)
// Positions (dwpe) take a second sort. Without enough workspace it falls back to an f32
// atomicAdd scatter (not bitwise reproducible).
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

constexpr int64_t kChunk = 64;       // sorted positions per chunk
constexpr int kColumnThreads = 256;  // columns per block of the chunk kernels

int64_t chunk_count(int64_t n) { return ceil_div(n, kChunk); }

// ids: [n] sorted ids; order: [n] their token indices (stable: increasing within a run);
// dst: [rows, dim] f32 holding ids [row_start, row_start + rows); head, tail: [chunks, dim] f32.
// Block (j, y) handles chunk j's sorted positions and columns [y * 256, y * 256 + 256). For each
// segment [m, e) of equal ids inside the chunk, in token order:
//   the whole run (it neither came from before nor goes on): dst[id] = ((dst[id] + d_m) + ...) (=)
//   the run came from the previous chunk: head[j] = (d_m + ...) (=)
//   the run starts here and goes on into the next chunk: tail[j] = (d_m + ...) (=)
template <typename T>
__global__ void embedding_bwd_chunk_segments(float* dst, float* head, float* tail, const T* dout,
                                             const int32_t* ids, const int32_t* order, int64_t n,
                                             int64_t dim, int64_t row_start, int64_t rows) {
  __shared__ int32_t s_ids[kChunk + 2];  // ids[begin - 1 .. end] (-1 past either end)
  __shared__ int32_t s_order[kChunk];
  const int64_t j = blockIdx.x;
  const int64_t begin = j * kChunk, end = min(n, begin + kChunk), len = end - begin;
  for (int64_t i = threadIdx.x; i < len + 2; i += blockDim.x) {
    const int64_t m = begin - 1 + i;
    s_ids[i] = m >= 0 && m < n ? ids[m] : -1;
    if (i < len) s_order[i] = order[begin + i];
  }
  __syncthreads();
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (c >= dim) return;
  for (int64_t m = 0; m < len;) {
    const int32_t id = s_ids[m + 1];
    int64_t e = m + 1;
    while (e < len && s_ids[e + 1] == id) ++e;
    const bool from_before = m == 0 && s_ids[0] == id;
    const bool goes_on = e == len && s_ids[len + 1] == id;
    const int64_t row = static_cast<int64_t>(id) - row_start;
    if (row >= 0 && row < rows) {
      const bool whole = !from_before && !goes_on;
      float acc = whole ? dst[row * dim + c] : 0.0f;
      for (int64_t k = m; k < e; ++k)
        acc += to_f32(dout[static_cast<int64_t>(s_order[k]) * dim + c]);
      if (whole) {
        dst[row * dim + c] = acc;
      } else {
        (from_before ? head : tail)[j * dim + c] = acc;
      }
    }
    m = e;
  }
}

// The runs that cross chunks: block (j, y) owns the run that starts in chunk j and goes on past
// its end, and adds its partial sums in chunk order: dst[id] += ((tail[j] + head[j+1]) + ...).
__global__ void embedding_bwd_chunk_spans(float* dst, const float* head, const float* tail,
                                          const int32_t* ids, int64_t n, int64_t dim,
                                          int64_t row_start, int64_t rows) {
  const int64_t j = blockIdx.x;
  const int64_t begin = j * kChunk, end = begin + kChunk;
  if (end >= n) return;
  const int32_t id = ids[end - 1];
  if (ids[end] != id) return;                                         // the last run ends here
  if (begin > 0 && ids[begin] == id && ids[begin - 1] == id) return;  // it started earlier
  const int64_t row = static_cast<int64_t>(id) - row_start;
  const int64_t c = static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (row < 0 || row >= rows || c >= dim) return;
  float acc = tail[j * dim + c];
  for (int64_t q = j + 1;; ++q) {
    acc += head[q * dim + c];
    const int64_t next = (q + 1) * kChunk;
    if (next >= n || ids[next] != id) break;
  }
  dst[row * dim + c] += acc;
}

int64_t blocks_for(int64_t threads) { return ceil_div(threads, kThreads); }

// Scratch of one sorted pass carved from the GEMM workspace: sorted keys, token indices before
// and after the sort, and CUB's temporary storage; empty views when it does not fit.
struct SortScratch {
  int32_t *keys_out = nullptr, *order_in = nullptr, *order_out = nullptr;
  float *head = nullptr, *tail = nullptr;  // [chunks, dim] each
  void* temp = nullptr;
  size_t temp_bytes = 0;
};

SortScratch sort_scratch(int64_t n, int64_t dim, const engine::Workspace& ws) {
  SortScratch s;
  const auto round256 = [](size_t b) { return (b + 255) / 256 * 256; };
  const size_t aligned = round256(static_cast<size_t>(n) * sizeof(int32_t));
  const size_t partials = round256(static_cast<size_t>(chunk_count(n) * dim) * sizeof(float));
  ANVIL_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, s.temp_bytes, static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr),
      static_cast<const int32_t*>(nullptr), static_cast<int32_t*>(nullptr), n));
  if (ws.data == nullptr || 3 * aligned + 2 * partials + s.temp_bytes > ws.bytes) {
    return SortScratch{};
  }
  char* base = static_cast<char*>(ws.data);
  s.keys_out = reinterpret_cast<int32_t*>(base);
  s.order_in = reinterpret_cast<int32_t*>(base + aligned);
  s.order_out = reinterpret_cast<int32_t*>(base + 2 * aligned);
  s.head = reinterpret_cast<float*>(base + 3 * aligned);
  s.tail = reinterpret_cast<float*>(base + 3 * aligned + partials);
  s.temp = base + 3 * aligned + 2 * partials;
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
  const dim3 grid(static_cast<unsigned>(chunk_count(n)),
                  static_cast<unsigned>(ceil_div(dim, kColumnThreads)));
  embedding_bwd_chunk_segments<T><<<grid, kColumnThreads, 0, stream>>>(
      dst, s.head, s.tail, dout, s.keys_out, s.order_out, n, dim, row_start, rows);
  embedding_bwd_chunk_spans<<<grid, kColumnThreads, 0, stream>>>(dst, s.head, s.tail, s.keys_out, n,
                                                                 dim, row_start, rows);
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
  const SortScratch scratch = sort_scratch(args.tokens, args.dim, stream.gemm_workspace());
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
