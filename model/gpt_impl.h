// GptModel's private state, shared by gpt.cc (creation, optimizer) and gpt_pass.cc
// (forward/backward). Not part of the public API.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/stream.h"
#include "model/gpt.h"
#include "model/gpt_layout.h"

namespace anvil::model {

struct GptModel::Impl {
  GptConfig cfg;
  GptRunShape shape;
  GptPrecision prec;
  uint64_t seed = 0;                                          // parameter init and dropout key
  std::vector<std::pair<std::string, engine::Arena>> arenas;  // by plan category
  gpt_detail::Buffers buf;

  // Dropout sites per forward: the embedding, then per layer attention probabilities,
  // attention output, MLP output. Each owns `site_stride` Philox counters.
  uint64_t site_stride = 0;
  int64_t n_sites() const { return 1 + 3 * cfg.n_layers; }
  uint64_t dropout_offset = 0;  // of the last forward
  bool ready_for_backward = false;

  uint64_t site_offset(int64_t site) const {
    return dropout_offset * site_stride * static_cast<uint64_t>(n_sites()) +
           static_cast<uint64_t>(site) * site_stride;
  }
  void forward(const int32_t* tokens, const int32_t* positions, const int32_t* targets, bool train,
               engine::Stream& stream);
  void backward(float grad_scale, engine::Stream& stream);
};

}  // namespace anvil::model
