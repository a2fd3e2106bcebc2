// CPU twin of the fused softmax + cross-entropy, the reference for the CUDA kernel:
//   lse = log sum_{c < vocab} exp(x[c]);  loss[r] = w[r] (lse - x[target])             (=)
//   dlogits[r, c] = grad_scale * w[r] * (exp(x[c] - lse) - [c == target]) for c < vocab,
//                   0 after                                                              (=)
// w: args.row_weights, or 1 when empty.
// Ignored rows (target < 0): loss 0, gradient row 0. Accumulates in double whatever the storage
// type (f32, f64, bf16 or f16: scalar_io); each row is read completely before its gradient is
// written, so dlogits may alias logits.
#include "ops/cross_entropy.h"

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

// T: logits/dlogits storage (scalar_io's types); L: losses storage.
template <typename T, typename L>
void cross_entropy_rows(const CrossEntropyArgs& args, L* losses, T* dlogits, const T* logits,
                        const int32_t* targets) {
  const int64_t vocab = args.vocab;
  const int64_t pv = args.padded_vocab;
  const float* weights = args.row_weights.empty() ? nullptr : args.row_weights.as<float>();
  for (int64_t r = 0; r < args.rows; ++r) {
    const T* x = logits + r * pv;
    T* dx = dlogits == nullptr ? nullptr : dlogits + r * pv;
    const int32_t t = targets[r];
    if (t < 0) {
      losses[r] = L(0);
      if (dx != nullptr) {
        for (int64_t c = 0; c < pv; ++c) store(dx, c, 0.0);
      }
      continue;
    }
    ANVIL_CHECK_MSG(t < vocab, "softmax_cross_entropy (cpu): target " + std::to_string(t) +
                                   " >= vocab " + std::to_string(vocab));
    double mx = -INFINITY;
    for (int64_t c = 0; c < vocab; ++c) mx = std::fmax(mx, load(x, c));
    double sum = 0.0;
    for (int64_t c = 0; c < vocab; ++c) sum += std::exp(load(x, c) - mx);
    const double lse = mx + std::log(sum);
    const double w = weights == nullptr ? 1.0 : static_cast<double>(weights[r]);
    losses[r] = static_cast<L>(w * (lse - load(x, t)));
    if (dx == nullptr) continue;
    const double scale = args.grad_scale * w;
    for (int64_t c = 0; c < vocab; ++c) {
      const double p = std::exp(load(x, c) - lse);  // read before the (possibly aliased) write
      store(dx, c, scale * (p - (c == t ? 1.0 : 0.0)));
    }
    for (int64_t c = vocab; c < pv; ++c) store(dx, c, 0.0);
  }
}

template <typename T>
void dispatch_loss(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                   ConstTensorView logits, ConstTensorView targets) {
  T* dx = dlogits.empty() ? nullptr : dlogits.as<T>();
  if (losses.dtype == DType::kF64) {
    cross_entropy_rows<T, double>(args, losses.as<double>(), dx, logits.as<T>(),
                                  targets.as<int32_t>());
  } else {
    cross_entropy_rows<T, float>(args, losses.as<float>(), dx, logits.as<T>(),
                                 targets.as<int32_t>());
  }
}

}  // namespace

void softmax_cross_entropy(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                           ConstTensorView logits, ConstTensorView targets, Stream& /*stream*/) {
  dispatch_float(logits.dtype, "softmax_cross_entropy (cpu)", [&](auto tag) {
    dispatch_loss<std::remove_pointer_t<decltype(tag)>>(args, losses, dlogits, logits, targets);
  });
}

}  // namespace anvil::ops::cpu
