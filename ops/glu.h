// Gated linear units (Shazeer 2020, "GLU Variants Improve Transformer") on a fused projection:
//   h = [g | u] per row (g = columns [0, f): the activation's input, "gate"; u = columns [f, 2f):
//   linear, "up"), as Megatron-LM core's and HF LLaMA's act(gate) * up:
//   forward : y = act(g) * u                                  (=)
//   backward: dg = dy * u * act'(g),  du = dy * act(g)        (= into dh = [dg | du])
// act: kSwiglu silu(x) = x * sigmoid(x); kGeglu exact erf GELU 0.5 x (1 + erf(x / sqrt(2)))
// (torch F.gelu's default, HF "gelu"); kReglu relu(x) = max(x, 0) (act'(0) = 0, as torch);
// kLiglu identity (bilinear); kGegluTanh tanh-approximated GELU (HF "gelu_new": T5 v1.1's
// gated-gelu, gate = wi_0, up = wi_1).
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

enum class GluKind { kSwiglu, kGeglu, kReglu, kLiglu, kGegluTanh };

// y: [rows, f] act; h: [rows, 2f] act. Both contiguous.
void glu_forward(GluKind kind, TensorView y, ConstTensorView h, Stream& stream);
// dh: [rows, 2f] act (=); dy: [rows, f] act; h: [rows, 2f] act (the forward input).
void glu_backward(GluKind kind, TensorView dh, ConstTensorView dy, ConstTensorView h,
                  Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 (math in double); cuda: bf16/f32 (math in f32).
namespace cpu {
void glu_forward(GluKind kind, TensorView y, ConstTensorView h, Stream& stream);
void glu_backward(GluKind kind, TensorView dh, ConstTensorView dy, ConstTensorView h,
                  Stream& stream);
}  // namespace cpu
namespace cuda {
void glu_forward(GluKind kind, TensorView y, ConstTensorView h, Stream& stream);
void glu_backward(GluKind kind, TensorView dh, ConstTensorView dy, ConstTensorView h,
                  Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
