// The two gradient GEMMs of a bias-free linear layer y [rows, out] = x [rows, in] W^T, W: [out, in]
// (shared by the GPT and T5 passes):
//   weight_grad: dW += alpha dy^T x          (+=, f32 or f64 gradient)
//   input_grad : dx = alpha dy W + beta dx    (= with beta 0, += with beta 1)
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"
#include "ops/gemm.h"

namespace anvil::model {

// dw: [out, in] (+=); dy: [rows, out]; x: [rows, in].
inline void weight_grad(engine::TensorView dw, engine::ConstTensorView dy,
                        engine::ConstTensorView x, engine::Stream& s, float alpha = 1.0f) {
  ops::GemmArgs g{dw.dim(0), dw.dim(1), dy.dim(0)};
  g.trans_a = true;
  g.alpha = alpha;
  g.beta = 1.0f;
  ops::gemm(g, dw, dy, x, {}, {}, s);
}

// dx: [rows, in] (= or +=, per beta); dy: [rows, out]; w: [out, in].
inline void input_grad(engine::TensorView dx, engine::ConstTensorView dy, engine::ConstTensorView w,
                       engine::Stream& s, float alpha = 1.0f, float beta = 0.0f) {
  ops::GemmArgs g{dy.dim(0), w.dim(1), w.dim(0)};
  g.alpha = alpha;
  g.beta = beta;
  ops::gemm(g, dx, dy, w, {}, {}, s);
}

}  // namespace anvil::model
