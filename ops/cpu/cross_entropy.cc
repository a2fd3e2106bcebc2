// CPU twin of the fused softmax + cross-entropy, the reference for the CUDA kernel:
//   lse = log sum_{c < vocab} exp(x[c]);  loss[r] = lse - x[target]                    (=)
//   dlogits[r, c] = grad_scale * (exp(x[c] - lse) - [c == target]) for c < vocab, 0 after (=)
// Ignored rows (target < 0): loss 0, gradient row 0. Accumulates in double whatever the storage
// type (f32, f64 or bf16); each row is read completely before its gradient is written, so
// dlogits may alias logits.
#include "ops/cross_entropy.h"

#include <cmath>
#include <cstdint>

#include "engine/dtype.h"
#include "engine/status.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

// Storage <-> double for the element types the twin reads and writes.
template <typename T>
double load(const T* p, int64_t i) {
  return static_cast<double>(p[i]);
}
template <>
double load<uint16_t>(const uint16_t* p, int64_t i) {
  return engine::bf16_to_f32(p[i]);
}
template <typename T>
void store(T* p, int64_t i, double v) {
  p[i] = static_cast<T>(v);
}
template <>
void store<uint16_t>(uint16_t* p, int64_t i, double v) {
  p[i] = engine::f32_to_bf16(static_cast<float>(v));
}

// T: logits/dlogits storage (uint16_t = bf16 bits); L: losses storage.
template <typename T, typename L>
void cross_entropy_rows(const CrossEntropyArgs& args, L* losses, T* dlogits, const T* logits,
                        const int32_t* targets) {
  const int64_t vocab = args.vocab;
  const int64_t pv = args.padded_vocab;
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
    losses[r] = static_cast<L>(lse - load(x, t));
    if (dx == nullptr) continue;
    const double scale = args.grad_scale;
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
  switch (logits.dtype) {
    case DType::kF32:
      dispatch_loss<float>(args, losses, dlogits, logits, targets);
      break;
    case DType::kF64:
      dispatch_loss<double>(args, losses, dlogits, logits, targets);
      break;
    case DType::kBF16:
      dispatch_loss<uint16_t>(args, losses, dlogits, logits, targets);
      break;
    default:
      ANVIL_CHECK_MSG(false, "softmax_cross_entropy (cpu): unsupported logits dtype " +
                                 std::string(engine::dtype_name(logits.dtype)));
  }
}

}  // namespace anvil::ops::cpu
