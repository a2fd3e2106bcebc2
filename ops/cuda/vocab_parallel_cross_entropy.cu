// CUDA vocab-parallel softmax + cross-entropy over local logits x = global columns
// [shard_start, shard_start + shard_cols), of which the first `real` (global column < vocab)
// enter the math. One block per row, f32 math, 16-byte packs when the row length and pointers
// allow (else scalar), whole packs over the real columns then a scalar tail:
//   shard_max:     row_max[r] = max_{c < real} x[r, c] (-inf when real = 0)               (=)
//   shard_sum_exp: sum_exp[r] = sum_{c < real} __expf(x[r, c] - row_max[r]);
//                  target_logit[r] = x[r, target - shard_start] if local, 0 if not or
//                  ignored, NaN if target >= vocab                                      (=)
//   shard_ce:      lse = row_max + logf(sum_exp); loss = lse - target_logit (0 if ignored);
//                  dlogits = grad_scale * (__expf(x - lse) - onehot) on real columns, 0 on
//                  padding and on ignored rows; a target >= vocab gives NaN loss/gradient (=)
// dlogits may alias logits: in shard_ce each element is read and then written by the same
// thread and nothing else reads the row, so pointers are deliberately not __restrict__.
#include <algorithm>
#include <cub/block/block_reduce.cuh>
#include <initializer_list>
#include <limits>
#include <string>
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/status.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/vocab_parallel_cross_entropy.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 256;

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};

// Local columns whose global column is below vocab: [0, real).
int64_t real_cols(const VocabShardArgs& a) {
  return std::min(std::max<int64_t>(a.vocab - a.shard_start, 0), a.shard_cols);
}

// Calls f(x[c]) (as f32) for every real column c of one row, kVec-element packs first.
template <typename T, int kVec, typename F>
__device__ __forceinline__ void for_real_cols(const T* x, int64_t real, F&& f) {
  const int64_t packs = real / kVec;
  for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
    const Packed<T, kVec> p = load_packed<kVec>(x + i * kVec);
#pragma unroll
    for (int k = 0; k < kVec; ++k) f(to_f32(p.v[k]));
  }
  for (int64_t c = packs * kVec + threadIdx.x; c < real; c += kThreads) f(to_f32(x[c]));
}

// row_max: [rows] f32; logits: [rows, cols] T. Grid: one block per row.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    shard_max_kernel(float* row_max, const T* logits, int64_t cols, int64_t real) {
  const T* x = logits + static_cast<int64_t>(blockIdx.x) * cols;
  float m = -INFINITY;
  for_real_cols<T, kVec>(x, real, [&](float v) { m = fmaxf(m, v); });
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const float total = BlockReduce(temp).Reduce(m, MaxOp());
  if (threadIdx.x == 0) row_max[blockIdx.x] = total;
}

// sum_exp, target_logit, row_max: [rows] f32; logits: [rows, cols] T; targets: [rows] i32.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    shard_sum_exp_kernel(float* sum_exp, float* target_logit, const T* logits, const float* row_max,
                         const int32_t* targets, int64_t cols, int64_t real, int64_t shard_start,
                         int64_t vocab) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  const float m = row_max[row];
  float s = 0.0f;
  for_real_cols<T, kVec>(x, real, [&](float v) { s += __expf(v - m); });
  using BlockReduce = cub::BlockReduce<float, kThreads>;
  __shared__ typename BlockReduce::TempStorage temp;
  const float total = BlockReduce(temp).Sum(s);
  if (threadIdx.x == 0) {
    sum_exp[row] = total;
    const int32_t t = targets[row];
    const int64_t c = static_cast<int64_t>(t) - shard_start;
    float xt = 0.0f;
    if (t >= vocab) {
      xt = NAN;  // cannot be reported without a host sync: poison the loss on every rank
    } else if (t >= 0 && c >= 0 && c < cols) {
      xt = to_f32(x[c]);
    }
    target_logit[row] = xt;
  }
}

// Loss of one row from the all-reduced statistics (0 for an ignored row, NaN for a bad target).
__device__ __forceinline__ float row_loss(int32_t t, int64_t vocab, float lse, float xt) {
  if (t < 0) return 0.0f;
  return t >= vocab ? NAN : lse - xt;
}

// losses, row_max, sum_exp, target_logit: [rows] f32; targets: [rows] i32. One thread per row.
// weights: [rows] f32 or null (1).
__global__ void shard_loss_kernel(float* losses, const float* row_max, const float* sum_exp,
                                  const float* target_logit, const int32_t* targets,
                                  const float* weights, int64_t rows, int64_t vocab) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  const float w = weights == nullptr ? 1.0f : weights[r];
  losses[r] = w * row_loss(targets[r], vocab, row_max[r] + logf(sum_exp[r]), target_logit[r]);
}

// losses, row_max, sum_exp, target_logit: [rows] f32; dlogits (may equal logits), logits:
// [rows, cols] T; targets: [rows] i32; weights: [rows] f32 or null (1). Grid: one block per row;
// kVec > 1 only when cols % kVec == 0 and both bases are 16-byte aligned.
template <typename T, int kVec>
__global__ void __launch_bounds__(kThreads)
    shard_ce_kernel(float* losses, T* dlogits, const T* logits, const float* row_max,
                    const float* sum_exp, const float* target_logit, const int32_t* targets,
                    const float* weights, int64_t cols, int64_t real, int64_t shard_start,
                    int64_t vocab, float grad_scale) {
  const int64_t row = blockIdx.x;
  const T* x = logits + row * cols;
  T* dx = dlogits + row * cols;
  const int32_t t = targets[row];
  const float lse = row_max[row] + logf(sum_exp[row]);
  const float w = weights == nullptr ? 1.0f : weights[row];
  if (threadIdx.x == 0) losses[row] = w * row_loss(t, vocab, lse, target_logit[row]);
  const float scale = grad_scale * w;
  const bool ignored = t < 0;  // uniform over the block
  const bool bad = t >= vocab;
  const int64_t local_t = static_cast<int64_t>(t) - shard_start;  // may lie outside [0, cols)
  const int64_t packs = cols / kVec;
  for (int64_t i = threadIdx.x; i < packs; i += kThreads) {
    const int64_t c0 = i * kVec;
    Packed<T, kVec> out;
    if (ignored || c0 >= real) {
#pragma unroll
      for (int k = 0; k < kVec; ++k) out.v[k] = from_f32<T>(0.0f);
    } else {
      const Packed<T, kVec> in = load_packed<kVec>(x + c0);
#pragma unroll
      for (int k = 0; k < kVec; ++k) {
        const int64_t c = c0 + k;
        float g = 0.0f;
        if (c < real) {
          const float p = __expf(to_f32(in.v[k]) - lse);
          g = bad ? NAN : scale * (c == local_t ? p - 1.0f : p);
        }
        out.v[k] = from_f32<T>(g);
      }
    }
    store_packed<kVec>(dx + c0, out);
  }
}

void check_grid(const VocabShardArgs& args, const char* op) {
  ANVIL_CHECK_MSG(
      args.rows <= std::numeric_limits<int32_t>::max(),
      std::string(op) + ": rows " + std::to_string(args.rows) + " exceed the grid limit");
}

// Launches kernel<T, kVec16<T>> when the rows of every pointer are 16-byte aligned, else
// kernel<T, 1>; `launch` receives std::integral_constant<int, kVec>.
template <typename T, typename L>
void launch_vec(const VocabShardArgs& args, std::initializer_list<const void*> ptrs, L&& launch) {
  constexpr int kV = kVec16<T>;
  if (args.shard_cols % kV == 0 && aligned_to(16, ptrs)) {
    launch(std::integral_constant<int, kV>());
  } else {
    launch(std::integral_constant<int, 1>());
  }
}

}  // namespace

void vocab_shard_max(const VocabShardArgs& args, TensorView row_max, ConstTensorView logits,
                     Stream& s) {
  constexpr const char* kOp = "cuda::vocab_shard_max";
  if (args.rows == 0) return;
  check_grid(args, kOp);
  const int64_t real = real_cols(args);
  dispatch_act<true>(logits.dtype, kOp, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_vec<T>(args, {logits.data}, [&](auto vec) {
      shard_max_kernel<T, decltype(vec)::value>
          <<<static_cast<unsigned>(args.rows), kThreads, 0, s.cuda_stream()>>>(
              row_max.as<float>(), logits.as<T>(), args.shard_cols, real);
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void vocab_shard_sum_exp(const VocabShardArgs& args, TensorView sum_exp, TensorView target_logit,
                         ConstTensorView logits, ConstTensorView row_max, ConstTensorView targets,
                         Stream& s) {
  constexpr const char* kOp = "cuda::vocab_shard_sum_exp";
  if (args.rows == 0) return;
  check_grid(args, kOp);
  const int64_t real = real_cols(args);
  dispatch_act<true>(logits.dtype, kOp, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_vec<T>(args, {logits.data}, [&](auto vec) {
      shard_sum_exp_kernel<T, decltype(vec)::value>
          <<<static_cast<unsigned>(args.rows), kThreads, 0, s.cuda_stream()>>>(
              sum_exp.as<float>(), target_logit.as<float>(), logits.as<T>(), row_max.as<float>(),
              targets.as<int32_t>(), args.shard_cols, real, args.shard_start, args.vocab);
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

void vocab_shard_cross_entropy(const VocabShardArgs& args, TensorView losses, TensorView dlogits,
                               ConstTensorView logits, ConstTensorView row_max,
                               ConstTensorView sum_exp, ConstTensorView target_logit,
                               ConstTensorView targets, Stream& s) {
  constexpr const char* kOp = "cuda::vocab_shard_cross_entropy";
  if (args.rows == 0) return;
  check_grid(args, kOp);
  const float* weights = args.row_weights.empty() ? nullptr : args.row_weights.as<float>();
  if (dlogits.empty()) {  // losses only: one thread per row
    constexpr int kLossThreads = 256;
    shard_loss_kernel<<<static_cast<unsigned>(ceil_div(args.rows, kLossThreads)), kLossThreads, 0,
                        s.cuda_stream()>>>(losses.as<float>(), row_max.as<float>(),
                                           sum_exp.as<float>(), target_logit.as<float>(),
                                           targets.as<int32_t>(), weights, args.rows, args.vocab);
    ANVIL_CUDA_LAUNCH_CHECK();
    return;
  }
  const int64_t real = real_cols(args);
  dispatch_act<true>(logits.dtype, kOp, [&](auto tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    launch_vec<T>(args, {logits.data, dlogits.data}, [&](auto vec) {
      shard_ce_kernel<T, decltype(vec)::value>
          <<<static_cast<unsigned>(args.rows), kThreads, 0, s.cuda_stream()>>>(
              losses.as<float>(), dlogits.as<T>(), logits.as<T>(), row_max.as<float>(),
              sum_exp.as<float>(), target_logit.as<float>(), targets.as<int32_t>(), weights,
              args.shard_cols, real, args.shard_start, args.vocab, args.grad_scale);
    });
  });
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
