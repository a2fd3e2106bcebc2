// CUDA token + learned position embedding:
//   forward : out[t, :] = wte[tokens[t], :] + wpe[positions[t], :]                    (=)
//   backward: dwte[tokens[t], :] += dout[t, :]; dwpe[positions[t], :] += dout[t, :]  (+=)
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

// out: [n, dim] T; tokens, positions: [n] i32; wte: [vocab, dim] T; wpe: [max_pos, dim] T.
// Thread i handles elements [c, c + V) of row t, where t = i / (dim / V), c = (i % (dim / V)) V.
template <typename T, int V>
__global__ void embedding_fwd_kernel_vec(T* out, const int32_t* tokens, const int32_t* positions,
                                         const T* wte, const T* wpe, int64_t n, int64_t dim) {
  const int64_t chunks = dim / V;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * chunks) return;
  const int64_t t = i / chunks;
  const int64_t c = (i - t * chunks) * V;
  const int64_t tok = tokens[t], pos = positions[t];
  const Packed<T, V> a = load_packed<V>(wte + tok * dim + c);
  const Packed<T, V> b = load_packed<V>(wpe + pos * dim + c);
  Packed<T, V> o;
#pragma unroll
  for (int k = 0; k < V; ++k) o.v[k] = from_f32<T>(to_f32(a.v[k]) + to_f32(b.v[k]));
  store_packed<V>(out + t * dim + c, o);
}

// dwte: [vocab, dim] f32 (+=); dwpe: [max_pos, dim] f32 (+=); dout: [n, dim] T.
template <typename T, int V>
__global__ void embedding_bwd_kernel_atomic_scatter(float* dwte, float* dwpe, const T* dout,
                                                    const int32_t* tokens, const int32_t* positions,
                                                    int64_t n, int64_t dim) {
  const int64_t chunks = dim / V;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n * chunks) return;
  const int64_t t = i / chunks;
  const int64_t c = (i - t * chunks) * V;
  const int64_t tok = tokens[t], pos = positions[t];
  const Packed<T, V> g = load_packed<V>(dout + t * dim + c);
#pragma unroll
  for (int k = 0; k < V; ++k) {
    const float v = to_f32(g.v[k]);
    atomicAdd(dwte + tok * dim + c + k, v);
    atomicAdd(dwpe + pos * dim + c + k, v);
  }
}

int64_t blocks_for(int64_t threads) { return ceil_div(threads, kThreads); }

}  // namespace

void embedding_forward(const EmbeddingArgs& args, TensorView out, ConstTensorView tokens,
                       ConstTensorView positions, ConstTensorView wte, ConstTensorView wpe,
                       Stream& stream) {
  if (args.tokens == 0) return;
  dispatch_act(out.dtype, "cuda::embedding_forward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = args.dim % kV == 0 && aligned_to(16, {out.data, wte.data, wpe.data});
    const int64_t threads = args.tokens * (vec ? args.dim / kV : args.dim);
    if (vec) {
      embedding_fwd_kernel_vec<T, kV><<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
          out.as<T>(), tokens.as<int32_t>(), positions.as<int32_t>(), wte.as<T>(), wpe.as<T>(),
          args.tokens, args.dim);
    } else {
      embedding_fwd_kernel_vec<T, 1><<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
          out.as<T>(), tokens.as<int32_t>(), positions.as<int32_t>(), wte.as<T>(), wpe.as<T>(),
          args.tokens, args.dim);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void embedding_backward(const EmbeddingArgs& args, TensorView dwte, TensorView dwpe,
                        ConstTensorView dout, ConstTensorView tokens, ConstTensorView positions,
                        Stream& stream) {
  if (args.tokens == 0) return;
  dispatch_act(dout.dtype, "cuda::embedding_backward", [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    constexpr int kV = kVec16<T>;
    const bool vec = args.dim % kV == 0 && aligned_to(16, {dout.data});
    const int64_t threads = args.tokens * (vec ? args.dim / kV : args.dim);
    if (vec) {
      embedding_bwd_kernel_atomic_scatter<T, kV>
          <<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
              dwte.as<float>(), dwpe.as<float>(), dout.as<T>(), tokens.as<int32_t>(),
              positions.as<int32_t>(), args.tokens, args.dim);
    } else {
      embedding_bwd_kernel_atomic_scatter<T, 1>
          <<<blocks_for(threads), kThreads, 0, stream.cuda_stream()>>>(
              dwte.as<float>(), dwpe.as<float>(), dout.as<T>(), tokens.as<int32_t>(),
              positions.as<int32_t>(), args.tokens, args.dim);
    }
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
