// CUDA fused softmax + cross-entropy, one block per row (token):
//   pass 1: online (max, sum of exp) in f32 over the real vocabulary, block-reduced;
//           loss[r] = w[r] (max + log(sum) - x[target])                                   (=)
//   pass 2: dlogits[r, c] = grad_scale * w[r] * (exp(x[c] - lse) - [c == target]),
//           0 on padding                                                                  (=)
// w: the row weights, or 1 (weights null).
// Ignored rows (target < 0) write loss 0 and a zero gradient row and skip the math. A target
// >= vocab cannot be reported without a host sync, so it yields a NaN loss and a NaN gradient
// over the real vocabulary (the step's gradient norm turns non-finite). dlogits may alias
// logits: no pass-2 write happens before the block barrier that ends pass 1, and in pass 2 each
// element is read and then written by the same thread, so pointers are deliberately not
// __restrict__ and loads do not use the read-only cache.
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <cub/block/block_reduce.cuh>
#include <limits>
#include <string>
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/cross_entropy.h"
#include "ops/cuda/vec_io.cuh"

namespace anvil::ops::cuda {
namespace {

using engine::DType;

constexpr int kThreads = 512;

// kVec consecutive elements moved with one 16-byte access (kVec = 16 / sizeof(T)) or, for
// kVec = 1, a scalar access.
template <typename T, int kVec>
struct Pack {
  T v[kVec];
};
template <typename T, int kVec>
__device__ __forceinline__ Pack<T, kVec> load_pack(const T* p) {
  Pack<T, kVec> out;
  if constexpr (kVec == 1) {
    out.v[0] = *p;
  } else {
    static_assert(sizeof(T) * kVec == 16, "vector packs are 16 bytes");
    const int4 raw = *reinterpret_cast<const int4*>(p);
    memcpy(&out, &raw, 16);
  }
  return out;
}
template <typename T, int kVec>
__device__ __forceinline__ void store_pack(T* p, const Pack<T, kVec>& in) {
  if constexpr (kVec == 1) {
    *p = in.v[0];
  } else {
    int4 raw;
    memcpy(&raw, &in, 16);
    *reinterpret_cast<int4*>(p) = raw;
  }
}

// Running softmax statistics: m = max seen, s = sum exp(x - m). m = -inf means "nothing seen".
struct MaxSum {
  float m;
  float s;
};
struct CombineMaxSum {
  __device__ __forceinline__ MaxSum operator()(const MaxSum& a, const MaxSum& b) const {
    if (a.m == -INFINITY) return b;  // guards exp(-inf - -inf) = NaN for empty threads
    if (b.m == -INFINITY) return a;
    const float m = fmaxf(a.m, b.m);
    return {m, a.s * __expf(a.m - m) + b.s * __expf(b.m - m)};
  }
};

// logits, dlogits: [rows, padded_vocab] T (dlogits may equal logits, or be null for losses only);
// losses: [rows] f32; targets: [rows] i32. Grid: one block per row. With kVec > 1 the launcher
// guarantees padded_vocab % kVec == 0 and 16-byte aligned bases, so every row is aligned.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    cross_entropy_block_per_row(float* losses, T* dlogits, const T* logits, const int32_t* targets,
                                const float* weights, int64_t vocab, int64_t padded_vocab,
                                float grad_scale) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * padded_vocab;
  T* dx = dlogits == nullptr ? nullptr : dlogits + row * padded_vocab;
  const int32_t target = targets[row];
  const int64_t num_packs = padded_vocab / kVec;

  if (target < 0) {  // ignored token; uniform over the block, so the early return is safe
    if (threadIdx.x == 0) losses[row] = 0.0f;
    if (dx != nullptr) {
      Pack<T, kVec> zero;
#pragma unroll
      for (int k = 0; k < kVec; ++k) zero.v[k] = from_f32<T>(0.0f);
      for (int64_t i = threadIdx.x; i < num_packs; i += kThreads) store_pack(dx + i * kVec, zero);
    }
    return;
  }
  const bool bad_target = target >= vocab;
  const float w = weights == nullptr ? 1.0f : weights[row];
  // Read the target logit now: with dlogits == logits it is overwritten after the barrier.
  float target_logit = 0.0f;
  if (threadIdx.x == 0 && !bad_target) target_logit = to_f32(x[target]);

  // Pass 1: online max/sum over the real vocabulary; whole packs, then the scalar tail.
  MaxSum acc{-INFINITY, 0.0f};
  const int64_t real_packs = vocab / kVec;
  for (int64_t i = threadIdx.x; i < real_packs; i += kThreads) {
    const Pack<T, kVec> p = load_pack<T, kVec>(x + i * kVec);
    float vals[kVec];
    float pack_max = -INFINITY;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      vals[k] = to_f32(p.v[k]);
      pack_max = fmaxf(pack_max, vals[k]);
    }
    const float m = fmaxf(acc.m, pack_max);
    float s = acc.m == -INFINITY ? 0.0f : acc.s * __expf(acc.m - m);
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      // A -inf logit contributes 0; the select keeps an all -inf pack from making -inf - -inf.
      s += vals[k] == -INFINITY ? 0.0f : __expf(vals[k] - m);
    }
    acc = {m, s};
  }
  for (int64_t c = real_packs * kVec + threadIdx.x; c < vocab; c += kThreads) {
    const float v = to_f32(x[c]);
    acc = CombineMaxSum()(acc, MaxSum{v, 1.0f});
  }

  using BlockReduce = cub::BlockReduce<MaxSum, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  __shared__ float shared_lse;
  const MaxSum total = BlockReduce(temp).Reduce(acc, CombineMaxSum());
  if (threadIdx.x == 0) {
    const float lse = total.m + logf(total.s);
    shared_lse = lse;
    losses[row] = bad_target ? NAN : w * (lse - target_logit);
  }
  // Every pass-1 read of this row happens before this barrier, every pass-2 write after it.
  __syncthreads();
  if (dx == nullptr) return;

  // Pass 2: gradient over the whole padded row.
  const float lse = shared_lse;
  const float scale = grad_scale * w;
  for (int64_t i = threadIdx.x; i < num_packs; i += kThreads) {
    const int64_t c0 = i * kVec;
    const Pack<T, kVec> in = load_pack<T, kVec>(x + c0);
    Pack<T, kVec> out;
#pragma unroll
    for (int k = 0; k < kVec; ++k) {
      const int64_t c = c0 + k;
      float g = 0.0f;
      if (c < vocab) {
        const float p = __expf(to_f32(in.v[k]) - lse);
        g = bad_target ? NAN : scale * (c == target ? p - 1.0f : p);
      }
      out.v[k] = from_f32<T>(g);
    }
    store_pack(dx + c0, out);
  }
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

template <typename T>
void launch(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
            ConstTensorView logits, ConstTensorView targets, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const T* x = static_cast<const T*>(logits.data);
  T* dx = dlogits.empty() ? nullptr : static_cast<T*>(dlogits.data);
  const float* weights = args.row_weights.empty() ? nullptr : args.row_weights.as<float>();
  const bool vectorize =
      args.padded_vocab % kVec == 0 && aligned16(x) && (dx == nullptr || aligned16(dx));
  const dim3 grid(static_cast<unsigned>(args.rows));
  if (vectorize) {
    cross_entropy_block_per_row<T, kVec>
        <<<grid, kThreads, 0, stream>>>(losses.as<float>(), dx, x, targets.as<int32_t>(), weights,
                                        args.vocab, args.padded_vocab, args.grad_scale);
  } else {
    cross_entropy_block_per_row<T, 1>
        <<<grid, kThreads, 0, stream>>>(losses.as<float>(), dx, x, targets.as<int32_t>(), weights,
                                        args.vocab, args.padded_vocab, args.grad_scale);
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace

void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& stream) {
  if (args.rows == 0) return;
  ANVIL_CHECK_MSG(
      args.rows <= std::numeric_limits<int32_t>::max(),
      "softmax_cross_entropy (cuda): rows " + std::to_string(args.rows) + " exceed the grid limit");
  dispatch_act<true>(logits.dtype, "softmax_cross_entropy (cuda)", [&](auto tag) {
    launch<std::remove_pointer_t<decltype(tag)>>(args, losses, dlogits, logits, targets,
                                                 stream.cuda_stream());
  });
}

}  // namespace anvil::ops::cuda
