// Linear layers y = x W^T (+ b) over ops::gemm, as every block and head uses them, with their
// backward: the weight (and bias) gradients accumulate (+=), the input gradient is written (=)
// unless beta says otherwise. W: [out, in] row-major (HF / Megatron layout); x: [rows, in].
// Private to model/.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"
#include "ops/gemm.h"

namespace anvil::model::blocks {

// y [rows, out] = x [rows, in] W^T (+ b unless b is empty), W: [out, in].
inline void linear(engine::TensorView y, engine::ConstTensorView x, engine::ConstTensorView w,
                   engine::ConstTensorView b, engine::Stream& s) {
  ops::GemmArgs g{x.dim(0), w.dim(0), w.dim(1)};
  g.trans_b = true;
  g.epilogue = b.empty() ? ops::Epilogue::kNone : ops::Epilogue::kBias;
  ops::gemm(g, y, x, w, b, {}, s);
}

// Row-parallel linear y [rows, out] = sum over TP of x [rows, in/tp] W^T [in/tp, out], + b once:
// each rank computes its partial sum (=), add_bias on one rank only.
inline void row_linear(engine::TensorView y, engine::ConstTensorView x, engine::ConstTensorView w,
                       engine::ConstTensorView b, bool add_bias, engine::Stream& s) {
  linear(y, x, w, add_bias ? b : engine::ConstTensorView{}, s);
}

// dW [out, in] += alpha dy^T x (f32 gradient); dy: [rows, out], x: [rows, in].
inline void weight_grad(engine::TensorView dw, engine::ConstTensorView dy,
                        engine::ConstTensorView x, engine::Stream& s, float alpha = 1.0f) {
  ops::GemmArgs g{dw.dim(0), dw.dim(1), dy.dim(0)};
  g.trans_a = true;
  g.alpha = alpha;
  g.beta = 1.0f;
  ops::gemm(g, dw, dy, x, {}, {}, s);
}

// dW [out, in] += dy^T x and db [out] += column sums of dy (f32), in one pass over dy; db
// empty: a layer without bias, dW only.
inline void weight_bias_grad(engine::TensorView dw, engine::TensorView db,
                             engine::ConstTensorView dy, engine::ConstTensorView x,
                             engine::Stream& s) {
  if (db.empty()) {
    weight_grad(dw, dy, x, s);
    return;
  }
  ops::GemmArgs g{dw.dim(0), dw.dim(1), dy.dim(0)};
  g.trans_a = true;
  g.beta = 1.0f;
  ops::gemm_bias_grad(g, dw, db, dy, x, s);
}

// dx [rows, in] = alpha dy [rows, out] W [out, in] + beta dx (beta 0: =, 1: +=).
inline void input_grad(engine::TensorView dx, engine::ConstTensorView dy, engine::ConstTensorView w,
                       engine::Stream& s, float alpha = 1.0f, float beta = 0.0f) {
  ops::GemmArgs g{dy.dim(0), w.dim(1), w.dim(0)};
  g.alpha = alpha;
  g.beta = beta;
  ops::gemm(g, dx, dy, w, {}, {}, s);
}

// The backward of linear(): dW += dy^T x, db += column sums of dy (db empty: no bias), then
// dx = dy W (=). dy: [rows, out]; x, dx: [rows, in].
inline void linear_backward(engine::TensorView dx, engine::TensorView dw, engine::TensorView db,
                            engine::ConstTensorView dy, engine::ConstTensorView x,
                            engine::ConstTensorView w, engine::Stream& s) {
  weight_bias_grad(dw, db, dy, x, s);
  input_grad(dx, dy, w, s);
}

}  // namespace anvil::model::blocks
