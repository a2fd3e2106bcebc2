// The normalization of the GPT blocks and of ln_f (GptConfig::norm), one call per use:
// LayerNorm (ops/layernorm.h: gamma, beta, saved mean and rstd) or RMSNorm (ops/rmsnorm.h:
// gamma only, saved rstd; beta, mean and dbeta are empty views). Same = / += conventions as
// the ops. Private to model/.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/gpt.h"
#include "ops/layernorm.h"

namespace anvil::model::gpt_detail {

struct NormArgs {
  Norm norm;
  int64_t rows, cols;
  float eps;
};

// y, mean (LayerNorm), rstd (=) of x.
void norm_forward(const NormArgs& a, engine::TensorView y, engine::TensorView mean,
                  engine::TensorView rstd, engine::ConstTensorView x, engine::ConstTensorView gamma,
                  engine::ConstTensorView beta, engine::Stream& s);
// sum = x + r (=), then norm_forward of sum.
void residual_norm_forward(const NormArgs& a, engine::TensorView sum, engine::TensorView y,
                           engine::TensorView mean, engine::TensorView rstd,
                           engine::ConstTensorView x, engine::ConstTensorView r,
                           engine::ConstTensorView gamma, engine::ConstTensorView beta,
                           engine::Stream& s);
// dx (= or += per acc), dgamma and dbeta (LayerNorm) += .
void norm_backward(const NormArgs& a, ops::Accumulate acc, engine::TensorView dx,
                   engine::TensorView dgamma, engine::TensorView dbeta, engine::ConstTensorView dy,
                   engine::ConstTensorView x, engine::ConstTensorView gamma,
                   engine::ConstTensorView mean, engine::ConstTensorView rstd, engine::Workspace ws,
                   engine::Stream& s);

}  // namespace anvil::model::gpt_detail
