// CPU twin of the vocab-parallel softmax + cross-entropy (reference for the CUDA kernels), over
// local logits x = global columns [shard_start, shard_start + shard_cols), of which the first
// `real` (global column < vocab) enter the math:
//   vocab_shard_max:           row_max[r] = max_{c < real} x[r, c], -inf if real = 0      (=)
//   vocab_shard_sum_exp:       sum_exp[r] = sum_{c < real} exp(x[r, c] - row_max[r]);
//                              target_logit[r] = x[r, target - shard_start] if local, else 0 (=)
//   vocab_shard_cross_entropy: lse = row_max + log(sum_exp); loss = lse - target_logit;
//                              dlogits[r, c] = grad_scale * (exp(x[r, c] - lse) - onehot)
//                              for c < real, 0 after; ignored rows: loss 0, gradient row 0 (=)
// Plain loops in double whatever the storage type (logits f32, f64 or bf16; stats f32 or f64).
// Each element is read before it is written, so dlogits may alias logits.
#include "ops/vocab_parallel_cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/status.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

// Local columns whose global column is below vocab: [0, real).
int64_t real_cols(const VocabShardArgs& a) {
  return std::clamp<int64_t>(a.vocab - a.shard_start, 0, a.shard_cols);
}

// Local column of target t, or -1 when t is ignored or lives on another shard.
int64_t local_target(const VocabShardArgs& a, int32_t t) {
  ANVIL_CHECK_MSG(t < a.vocab, "vocab_parallel_cross_entropy (cpu): target " + std::to_string(t) +
                                   " >= vocab " + std::to_string(a.vocab));
  const int64_t c = static_cast<int64_t>(t) - a.shard_start;
  return t >= 0 && c >= 0 && c < a.shard_cols ? c : -1;
}

// Calls f(T*, S*) tags for logits storage T and stats storage S (float or double).
template <typename F>
void dispatch(DType logits, DType stats, const char* op, F&& f) {
  dispatch_float(logits, op, [&](auto tag) {
    if (stats == DType::kF64) {
      f(tag, static_cast<double*>(nullptr));
    } else {
      ANVIL_CHECK_MSG(stats == DType::kF32, std::string(op) + ": stats must be f32 or f64, got " +
                                                std::string(engine::dtype_name(stats)));
      f(tag, static_cast<float*>(nullptr));
    }
  });
}

// row_max: [rows] S; x: [rows, shard_cols] T.
template <typename T, typename S>
void max_rows(const VocabShardArgs& a, S* row_max, const T* x) {
  const int64_t real = real_cols(a);
  for (int64_t r = 0; r < a.rows; ++r) {
    double m = -INFINITY;
    for (int64_t c = 0; c < real; ++c) m = std::fmax(m, load(x, r * a.shard_cols + c));
    store(row_max, r, m);
  }
}

// sum_exp, target_logit, row_max: [rows] S; x: [rows, shard_cols] T; targets: [rows] i32.
template <typename T, typename S>
void sum_exp_rows(const VocabShardArgs& a, S* sum_exp, S* target_logit, const T* x,
                  const S* row_max, const int32_t* targets) {
  const int64_t real = real_cols(a);
  for (int64_t r = 0; r < a.rows; ++r) {
    const T* xr = x + r * a.shard_cols;
    const double m = load(row_max, r);
    double sum = 0.0;
    for (int64_t c = 0; c < real; ++c) sum += std::exp(load(xr, c) - m);
    const int64_t t = local_target(a, targets[r]);
    store(sum_exp, r, sum);
    store(target_logit, r, t >= 0 ? load(xr, t) : 0.0);
  }
}

// losses, row_max, sum_exp, target_logit: [rows] S; dx (or null), x: [rows, shard_cols] T.
template <typename T, typename S>
void cross_entropy_rows(const VocabShardArgs& a, S* losses, T* dx, const T* x, const S* row_max,
                        const S* sum_exp, const S* target_logit, const int32_t* targets) {
  const int64_t real = real_cols(a);
  const float* weights = a.row_weights.empty() ? nullptr : a.row_weights.as<float>();
  for (int64_t r = 0; r < a.rows; ++r) {
    const int64_t row = r * a.shard_cols;
    const int64_t t = local_target(a, targets[r]);  // CHECKs target < vocab
    if (targets[r] < 0) {
      store(losses, r, 0.0);
      if (dx != nullptr) {
        for (int64_t c = 0; c < a.shard_cols; ++c) store(dx, row + c, 0.0);
      }
      continue;
    }
    const double lse = load(row_max, r) + std::log(load(sum_exp, r));
    const double w = weights == nullptr ? 1.0 : static_cast<double>(weights[r]);
    store(losses, r, w * (lse - load(target_logit, r)));
    if (dx == nullptr) continue;
    const double scale = a.grad_scale * w;
    for (int64_t c = 0; c < real; ++c) {
      const double p = std::exp(load(x, row + c) - lse);  // read before the (aliased) write
      store(dx, row + c, scale * (p - (c == t ? 1.0 : 0.0)));
    }
    for (int64_t c = real; c < a.shard_cols; ++c) store(dx, row + c, 0.0);
  }
}

}  // namespace

void vocab_shard_max(const VocabShardArgs& args, TensorView row_max, ConstTensorView logits,
                     Stream& /*s*/) {
  dispatch(logits.dtype, row_max.dtype, "cpu::vocab_shard_max", [&](auto t_tag, auto s_tag) {
    using T = std::remove_pointer_t<decltype(t_tag)>;
    using S = std::remove_pointer_t<decltype(s_tag)>;
    max_rows<T, S>(args, row_max.as<S>(), logits.as<T>());
  });
}

void vocab_shard_sum_exp(const VocabShardArgs& args, TensorView sum_exp, TensorView target_logit,
                         ConstTensorView logits, ConstTensorView row_max, ConstTensorView targets,
                         Stream& /*s*/) {
  dispatch(logits.dtype, sum_exp.dtype, "cpu::vocab_shard_sum_exp", [&](auto t_tag, auto s_tag) {
    using T = std::remove_pointer_t<decltype(t_tag)>;
    using S = std::remove_pointer_t<decltype(s_tag)>;
    sum_exp_rows<T, S>(args, sum_exp.as<S>(), target_logit.as<S>(), logits.as<T>(), row_max.as<S>(),
                       targets.as<int32_t>());
  });
}

void vocab_shard_cross_entropy(const VocabShardArgs& args, TensorView losses, TensorView dlogits,
                               ConstTensorView logits, ConstTensorView row_max,
                               ConstTensorView sum_exp, ConstTensorView target_logit,
                               ConstTensorView targets, Stream& /*s*/) {
  dispatch(
      logits.dtype, losses.dtype, "cpu::vocab_shard_cross_entropy", [&](auto t_tag, auto s_tag) {
        using T = std::remove_pointer_t<decltype(t_tag)>;
        using S = std::remove_pointer_t<decltype(s_tag)>;
        cross_entropy_rows<T, S>(args, losses.as<S>(), dlogits.empty() ? nullptr : dlogits.as<T>(),
                                 logits.as<T>(), row_max.as<S>(), sum_exp.as<S>(),
                                 target_logit.as<S>(), targets.as<int32_t>());
      });
}

}  // namespace anvil::ops::cpu
