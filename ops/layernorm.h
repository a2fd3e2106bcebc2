// LayerNorm over the last dim, optionally fused with the residual add that precedes it.
//   forward : y = (x - mean) * rstd * gamma + beta, rstd = 1/sqrt(var + eps)   (= y, mean, rstd)
//   residual: s = a + b (=), then y = layernorm(s)
//   backward: dx (= or += per Accumulate), dgamma += , dbeta +=
// mean/rstd are f32 and saved for backward.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;
using engine::Workspace;

// Whether an op writes an output (kOverwrite, =) or adds to it (kAdd, +=).
enum class Accumulate { kOverwrite, kAdd };

struct LayerNormArgs {
  int64_t rows;
  int64_t cols;
  float eps = 1e-5f;
};

// y: [rows, cols] act; mean, rstd: [rows] f32; x: [rows, cols] act; gamma, beta: [cols] act.
void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& stream);

// sum: [rows, cols] act (= a + b); then y, mean, rstd as layernorm_forward(sum).
void residual_layernorm_forward(const LayerNormArgs& args, TensorView sum, TensorView y,
                                TensorView mean, TensorView rstd, ConstTensorView a,
                                ConstTensorView b, ConstTensorView gamma, ConstTensorView beta,
                                Stream& stream);

// Bytes of workspace layernorm_backward needs (per-block partial dgamma/dbeta on the GPU).
size_t layernorm_backward_workspace_bytes(const LayerNormArgs& args);

// dx: [rows, cols] act (= or += per acc); dgamma, dbeta: [cols] f32 (+=);
// dy, x: [rows, cols] act; gamma: [cols] act; mean, rstd: [rows] f32 (from forward).
void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace ws, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 activations; with f64 activations mean/rstd and dgamma/dbeta may be f64 too
// (finite differences in double). Needs no workspace (its *_workspace_bytes is 0).
// cuda: bf16/f32 activations, f32 mean/rstd/dgamma/dbeta. Backward writes per-block partial
// dgamma/dbeta sums into the workspace and reduces them in a fixed order: deterministic (the
// block count follows the GPU's resident blocks: bitwise reproducible on one GPU model).
// The public layernorm_backward_workspace_bytes returns the CUDA size (enough for both).
namespace cpu {
void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& stream);
void residual_layernorm_forward(const LayerNormArgs& args, TensorView sum, TensorView y,
                                TensorView mean, TensorView rstd, ConstTensorView a,
                                ConstTensorView b, ConstTensorView gamma, ConstTensorView beta,
                                Stream& stream);
size_t layernorm_backward_workspace_bytes(const LayerNormArgs& args);
void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace ws, Stream& stream);
}  // namespace cpu
namespace cuda {
void layernorm_forward(const LayerNormArgs& args, TensorView y, TensorView mean, TensorView rstd,
                       ConstTensorView x, ConstTensorView gamma, ConstTensorView beta,
                       Stream& stream);
void residual_layernorm_forward(const LayerNormArgs& args, TensorView sum, TensorView y,
                                TensorView mean, TensorView rstd, ConstTensorView a,
                                ConstTensorView b, ConstTensorView gamma, ConstTensorView beta,
                                Stream& stream);
size_t layernorm_backward_workspace_bytes(const LayerNormArgs& args);
void layernorm_backward(const LayerNormArgs& args, Accumulate acc, TensorView dx, TensorView dgamma,
                        TensorView dbeta, ConstTensorView dy, ConstTensorView x,
                        ConstTensorView gamma, ConstTensorView mean, ConstTensorView rstd,
                        Workspace ws, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
