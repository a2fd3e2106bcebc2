// RMSNorm over the last dim (LLaMA / T5), optionally fused with the residual add before it:
//   forward : rstd = 1/sqrt(mean(x^2) + eps)  (f32, saved),  y = cast_act(x * rstd) * gamma  (=)
//   residual: sum = a + b rounded to the activation type (=), then y = rmsnorm(sum)
//   backward, with xhat = x * rstd and g = dy * gamma:
//     dx = rstd * (g - xhat * mean(g * xhat))   (= or += per Accumulate);  dgamma += sum_rows
//     dy*xhat
// Numerics follow HF LlamaRMSNorm / T5LayerNorm: the mean of squares is taken in f32 (or wider)
// from the activation-typed x, x * rstd is rounded to the activation dtype, and that rounded
// value is multiplied by gamma (in f32, then rounded once more). With f32 activations both
// roundings are one f32 rounding; with bf16 they match HF's `weight * hidden.to(bf16)`.
// There is no mean subtraction and no beta.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "ops/layernorm.h"  // Accumulate

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;
using engine::Workspace;

struct RmsNormArgs {
  int64_t rows;
  int64_t cols;
  float eps = 1e-6f;
};

// y: [rows, cols] act; rstd: [rows] f32 (saved for backward); x: [rows, cols] act;
// gamma: [cols] act.
void rmsnorm_forward(const RmsNormArgs& args, TensorView y, TensorView rstd, ConstTensorView x,
                     ConstTensorView gamma, Stream& stream);

// sum: [rows, cols] act (= a + b); then y, rstd as rmsnorm_forward(sum).
void residual_rmsnorm_forward(const RmsNormArgs& args, TensorView sum, TensorView y,
                              TensorView rstd, ConstTensorView a, ConstTensorView b,
                              ConstTensorView gamma, Stream& stream);

// Bytes of workspace rmsnorm_backward needs (per-block partial dgamma on the GPU).
size_t rmsnorm_backward_workspace_bytes(const RmsNormArgs& args);

// dx: [rows, cols] act (= or += per acc); dgamma: [cols] f32 (+=); dy, x: [rows, cols] act;
// gamma: [cols] act; rstd: [rows] f32 (from forward).
void rmsnorm_backward(const RmsNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                      ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                      ConstTensorView rstd, Workspace ws, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 activations; with f64 activations rstd and dgamma may be f64 too (finite
// differences in double). Needs no workspace.
// cuda: bf16/f32 activations, f32 rstd/dgamma. Backward writes per-block partial dgamma sums
// into the workspace and reduces them in a fixed order: deterministic (the block count follows
// the GPU's resident blocks: bitwise reproducible on one GPU model).
// The public rmsnorm_backward_workspace_bytes returns the CUDA size (enough for both).
namespace cpu {
void rmsnorm_forward(const RmsNormArgs& args, TensorView y, TensorView rstd, ConstTensorView x,
                     ConstTensorView gamma, Stream& stream);
void residual_rmsnorm_forward(const RmsNormArgs& args, TensorView sum, TensorView y,
                              TensorView rstd, ConstTensorView a, ConstTensorView b,
                              ConstTensorView gamma, Stream& stream);
size_t rmsnorm_backward_workspace_bytes(const RmsNormArgs& args);
void rmsnorm_backward(const RmsNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                      ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                      ConstTensorView rstd, Workspace ws, Stream& stream);
}  // namespace cpu
namespace cuda {
void rmsnorm_forward(const RmsNormArgs& args, TensorView y, TensorView rstd, ConstTensorView x,
                     ConstTensorView gamma, Stream& stream);
void residual_rmsnorm_forward(const RmsNormArgs& args, TensorView sum, TensorView y,
                              TensorView rstd, ConstTensorView a, ConstTensorView b,
                              ConstTensorView gamma, Stream& stream);
size_t rmsnorm_backward_workspace_bytes(const RmsNormArgs& args);
void rmsnorm_backward(const RmsNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                      ConstTensorView dy, ConstTensorView x, ConstTensorView gamma,
                      ConstTensorView rstd, Workspace ws, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
