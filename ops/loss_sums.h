// A training step's loss sums accumulated on the device, so that no micro-batch's loss is read
// by the host while the step runs:
//   S = sum_i x_i + y_weight * sum_j y_j                 (in double; y may be empty)
//   out[k] += scales[k] * S   for every k with scales[k] != 0                       (+=, f64)
// (x: a micro-batch's per-target losses, y: BERT's per-sample binary losses; out: the step's
// {loss sum, masked loss, ...}.) The CPU twin sums x, then y, in index order, as the host loop
// it replaces; the CUDA twin sums in one block in a fixed order (deterministic).
#pragma once

#include <array>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

inline constexpr int kMaxLossSums = 4;

struct LossSumArgs {
  double y_weight = 0.0;
  std::array<double, kMaxLossSums> scales{};  // entries past out's length must be 0
};

// out: [k] f64, k <= kMaxLossSums (+=); x: [n] f32 or f64, n >= 0; y: [m] of x's dtype, or empty.
void add_loss_sums(const LossSumArgs& args, TensorView out, ConstTensorView x, ConstTensorView y,
                   Stream& stream);

// Same-name twins behind the dispatcher. CPU: x, y f32 or f64. CUDA: f32.
namespace cpu {
void add_loss_sums(const LossSumArgs& args, TensorView out, ConstTensorView x, ConstTensorView y,
                   Stream& stream);
}  // namespace cpu
namespace cuda {
void add_loss_sums(const LossSumArgs& args, TensorView out, ConstTensorView x, ConstTensorView y,
                   Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
