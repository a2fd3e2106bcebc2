// CUDA token + learned position embedding, wte holding vocabulary rows
// [vocab_start, vocab_start + vocab) (vocab-parallel: other ids give a zero row / no gradient):
//   forward : out[t, :] = [tokens[t] in shard] wte[tokens[t] - vocab_start, :]
//                         + (wpe given ? wpe[positions[t], :] : 0)                        (=)
//   backward: dwte[tokens[t] - vocab_start, :] += dout[t, :] for tokens in the shard;
//             dwpe[positions[t], :] += dout[t, :] when dwpe is given                     (+=)
// One thread per V consecutive elements of a row (16-byte accesses when dim and the pointers
// allow, else scalar). Sums in f32, rounded once to the activation type. The backward scatters
// with f32 atomicAdd: repeated ids are summed in an unspecified order, so dwte/dwpe are not
// bitwise reproducible across runs (f32 rounding differences only). A deterministic scheme
// needs a sort by id (CUB radix sort + workspace), which this API has no workspace for.
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

int64_t blocks_for(int64_t threads) { return ceil_div(threads, kThreads); }

}  // namespace

void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream) {
  if (args.tokens == 0) return;
  // An empty wpe has data == nullptr, which the kernel reads as "no position term".
  dispatch_act(out.dtype, "cuda::embedding_forward", [&](auto tag) {
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
  // An empty dwpe has data == nullptr, which the kernel reads as "no position gradient".
  dispatch_act(dout.dtype, "cuda::embedding_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
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
