// Dispatcher of the device-side loss sums (math in ops/loss_sums.h): checks, then the twin.
#include "ops/loss_sums.h"

#include <string>

#include "engine/status.h"

namespace anvil::ops {
namespace {

std::string expected(const char* arg, const std::string& want, const ConstTensorView& got) {
  return std::string("add_loss_sums: ") + arg + " must be " + want + ", got " +
         engine::describe(got);
}

}  // namespace

void add_loss_sums(const LossSumArgs& args, TensorView out, ConstTensorView x, ConstTensorView y,
                   Stream& stream) {
  const engine::Device dev = stream.device();
  const int64_t k = out.numel();
  ANVIL_CHECK_MSG(
      out.dtype == engine::DType::kF64 && k >= 1 && k <= kMaxLossSums && out.is_contiguous() &&
          out.device == dev,
      expected("out",
               "contiguous [1.." + std::to_string(kMaxLossSums) + "] f64 on the stream's device",
               out));
  for (int64_t i = k; i < kMaxLossSums; ++i) {
    ANVIL_CHECK_MSG(args.scales[static_cast<size_t>(i)] == 0.0,
                    "add_loss_sums: scales[" + std::to_string(i) + "] is set but out has " +
                        std::to_string(k) + " entries");
  }
  const bool f64_ok = !stream.is_cuda();
  ANVIL_CHECK_MSG((x.dtype == engine::DType::kF32 || (f64_ok && x.dtype == engine::DType::kF64)) &&
                      x.is_contiguous() && x.device == dev,
                  expected("x",
                           stream.is_cuda() ? "contiguous f32 on the device"
                                            : "contiguous f32 or f64 on the host",
                           x));
  ANVIL_CHECK_MSG(y.empty() || (y.dtype == x.dtype && y.is_contiguous() && y.device == dev),
                  expected("y", "empty or contiguous of x's dtype on the stream's device", y));
  if (stream.is_cuda()) {
    cuda::add_loss_sums(args, out, x, y, stream);
  } else {
    cpu::add_loss_sums(args, out, x, y, stream);
  }
}

}  // namespace anvil::ops
