// LayerNorm / RMSNorm dispatch of the norm block (see norm.h).
#include "model/blocks/norm.h"

#include "ops/rmsnorm.h"

namespace anvil::model::blocks {

void norm_forward(const NormArgs& a, engine::TensorView y, engine::TensorView mean,
                  engine::TensorView rstd, engine::ConstTensorView x, engine::ConstTensorView gamma,
                  engine::ConstTensorView beta, engine::Stream& s) {
  if (a.kind == NormKind::kLayerNorm) {
    ops::layernorm_forward({a.rows, a.cols, a.eps}, y, mean, rstd, x, gamma, beta, s);
  } else {
    ops::rmsnorm_forward({a.rows, a.cols, a.eps}, y, rstd, x, gamma, s);
  }
}

void residual_norm_forward(const NormArgs& a, engine::TensorView sum, engine::TensorView y,
                           engine::TensorView mean, engine::TensorView rstd,
                           engine::ConstTensorView x, engine::ConstTensorView r,
                           engine::ConstTensorView gamma, engine::ConstTensorView beta,
                           engine::Stream& s) {
  if (a.kind == NormKind::kLayerNorm) {
    ops::residual_layernorm_forward({a.rows, a.cols, a.eps}, sum, y, mean, rstd, x, r, gamma, beta,
                                    s);
  } else {
    ops::residual_rmsnorm_forward({a.rows, a.cols, a.eps}, sum, y, rstd, x, r, gamma, s);
  }
}

void norm_backward(const NormArgs& a, ops::Accumulate acc, engine::TensorView dx,
                   engine::TensorView dgamma, engine::TensorView dbeta, engine::ConstTensorView dy,
                   engine::ConstTensorView x, engine::ConstTensorView gamma,
                   engine::ConstTensorView mean, engine::ConstTensorView rstd, engine::Workspace ws,
                   engine::Stream& s) {
  if (a.kind == NormKind::kLayerNorm) {
    ops::layernorm_backward({a.rows, a.cols, a.eps}, acc, dx, dgamma, dbeta, dy, x, gamma, mean,
                            rstd, ws, s);
  } else {
    ops::rmsnorm_backward({a.rows, a.cols, a.eps}, acc, dx, dgamma, dy, x, gamma, rstd, ws, s);
  }
}

}  // namespace anvil::model::blocks
