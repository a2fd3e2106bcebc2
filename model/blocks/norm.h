// The normalization block GPT, BERT and T5 share: LayerNorm (ops/layernorm.h: gamma, beta, saved
// mean and rstd) or RMSNorm (ops/rmsnorm.h: gamma only, saved rstd; beta, mean and dbeta are
// empty views) over the last dim of [rows, cols], alone or fused with the residual sum before
// it. Same = / += conventions as the ops: y, sum, mean, rstd (=); dgamma, dbeta (+=); dx (= or +=
// per acc). Private to model/.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "ops/layernorm.h"

namespace anvil::model::blocks {

enum class NormKind { kLayerNorm, kRmsNorm };

struct NormArgs {
  NormKind kind;
  int64_t rows, cols;
  float eps;
};

// y, mean (LayerNorm), rstd of x.
void norm_forward(const NormArgs& a, engine::TensorView y, engine::TensorView mean,
                  engine::TensorView rstd, engine::ConstTensorView x, engine::ConstTensorView gamma,
                  engine::ConstTensorView beta, engine::Stream& s);
// sum = x + r, then norm_forward of sum.
void residual_norm_forward(const NormArgs& a, engine::TensorView sum, engine::TensorView y,
                           engine::TensorView mean, engine::TensorView rstd,
                           engine::ConstTensorView x, engine::ConstTensorView r,
                           engine::ConstTensorView gamma, engine::ConstTensorView beta,
                           engine::Stream& s);
// dx (= or += per acc), dgamma and dbeta (LayerNorm) += from dy and the forward's x and
// statistics.
void norm_backward(const NormArgs& a, ops::Accumulate acc, engine::TensorView dx,
                   engine::TensorView dgamma, engine::TensorView dbeta, engine::ConstTensorView dy,
                   engine::ConstTensorView x, engine::ConstTensorView gamma,
                   engine::ConstTensorView mean, engine::ConstTensorView rstd, engine::Workspace ws,
                   engine::Stream& s);

}  // namespace anvil::model::blocks
