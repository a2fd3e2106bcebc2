// CPU twin of the fused softmax + cross-entropy, the reference for the CUDA kernel:
//   lse = log sum_{c < vocab} exp(x[c]);  loss[r] = w[r] (lse - x[target])             (=)
//   dlogits[r, c] = grad_scale * w[r] * (exp(x[c] - lse) - [c == target]) for c < vocab,
//                   0 after                                                              (=)
// w: args.row_weights, or 1 when empty.
// Ignored rows (target < 0): loss 0, gradient row 0. Accumulates in double whatever the storage
// type (f32, f64, bf16 or f16: scalar_io), one exp per element (kept for the gradient); each row
// is read completely before its gradient is written, so dlogits may alias logits. The rows are
// split over the host's cores (this is also the CPU training path: the LM head's softmax over a
// 50K vocabulary dominates a small model's step).
#include "ops/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <thread>
#include <type_traits>
#include <vector>

#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/cpu/scalar_io.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

// Rows [r0, r1). T: logits/dlogits storage (scalar_io's types); L: losses storage. e: [vocab]
// scratch holding exp(x - max) of the row, so that the gradient reuses the sum's exponentials.
template <typename T, typename L>
void cross_entropy_rows(const CrossEntropyArgs& args, int64_t r0, int64_t r1, L* losses, T* dlogits,
                        const T* logits, const int32_t* targets, double* e) {
  const int64_t vocab = args.vocab;
  const int64_t pv = args.padded_vocab;
  const float* weights = args.row_weights.empty() ? nullptr : args.row_weights.as<float>();
  for (int64_t r = r0; r < r1; ++r) {
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
    for (int64_t c = 0; c < vocab; ++c) {
      const double v = load(x, c);
      mx = v > mx ? v : mx;  // a NaN logit is skipped, as std::fmax skips it
    }
    double sum = 0.0;
    for (int64_t c = 0; c < vocab; ++c) {
      e[c] = std::exp(load(x, c) - mx);  // read before the (possibly aliased) write below
      sum += e[c];
    }
    const double lse = mx + std::log(sum);
    const double w = weights == nullptr ? 1.0 : static_cast<double>(weights[r]);
    losses[r] = static_cast<L>(w * (lse - load(x, t)));
    if (dx == nullptr) continue;
    const double scale = args.grad_scale * w;
    const double inv_sum = 1.0 / sum;
    for (int64_t c = 0; c < vocab; ++c) {
      store(dx, c, scale * (e[c] * inv_sum - (c == t ? 1.0 : 0.0)));
    }
    for (int64_t c = vocab; c < pv; ++c) store(dx, c, 0.0);
  }
}

// The rows split over up to hardware_concurrency threads (rows are independent, so the result
// does not depend on the split); small calls stay on the calling thread.
template <typename T, typename L>
void cross_entropy_all_rows(const CrossEntropyArgs& args, L* losses, T* dlogits, const T* logits,
                            const int32_t* targets) {
  constexpr int64_t kMinElementsPerThread = int64_t{1} << 20;
  const int64_t work = args.rows * args.vocab;
  const int64_t threads =
      std::clamp<int64_t>(std::min<int64_t>(work / kMinElementsPerThread, args.rows), 1,
                          std::max(1u, std::thread::hardware_concurrency()));
  std::vector<double> scratch(static_cast<size_t>(threads * args.vocab));
  auto run = [&](int64_t k) {
    const int64_t r0 = args.rows * k / threads, r1 = args.rows * (k + 1) / threads;
    cross_entropy_rows(args, r0, r1, losses, dlogits, logits, targets,
                       scratch.data() + k * args.vocab);
  };
  std::vector<std::thread> pool;
  for (int64_t k = 1; k < threads; ++k) pool.emplace_back(run, k);
  run(0);
  for (std::thread& th : pool) th.join();
}

template <typename T>
void dispatch_loss(const CrossEntropyArgs& args, TensorView losses, TensorView dlogits,
                   ConstTensorView logits, ConstTensorView targets) {
  T* dx = dlogits.empty() ? nullptr : dlogits.as<T>();
  if (losses.dtype == DType::kF64) {
    cross_entropy_all_rows<T, double>(args, losses.as<double>(), dx, logits.as<T>(),
                                      targets.as<int32_t>());
  } else {
    cross_entropy_all_rows<T, float>(args, losses.as<float>(), dx, logits.as<T>(),
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
