// CPU twin of the loss sums (math in ops/loss_sums.h): index order, double.
#include "ops/loss_sums.h"

namespace anvil::ops::cpu {
namespace {

double sum_of(const ConstTensorView& v) {
  double s = 0.0;
  const int64_t n = v.numel();
  if (v.dtype == engine::DType::kF64) {
    for (int64_t i = 0; i < n; ++i) s += v.as<double>()[i];
  } else {
    for (int64_t i = 0; i < n; ++i) s += static_cast<double>(v.as<float>()[i]);
  }
  return s;
}

}  // namespace

void add_loss_sums(const LossSumArgs& args, TensorView out, ConstTensorView x, ConstTensorView y,
                   Stream& /*stream*/) {
  double s = sum_of(x);
  if (!y.empty()) s += sum_of(y) * args.y_weight;
  double* o = out.as<double>();
  for (int64_t k = 0; k < out.numel(); ++k) {
    const double scale = args.scales[static_cast<size_t>(k)];
    if (scale != 0.0) o[k] += s * scale;
  }
}

}  // namespace anvil::ops::cpu
