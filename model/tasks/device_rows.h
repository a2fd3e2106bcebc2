// Rows of a [R, C] tensor on any device to and from host doubles, in the tensor's dtype (f32,
// f64, bf16, f16; rounded to nearest even on the way in): the classification heads
// (model/tasks/finetune_cls.h) read the final hidden state at a few positions and write its
// gradient there. Synchronizes the stream.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::model {

// Rows `rows` of x [R, C], as [rows.size(), C] (=).
std::vector<double> read_rows(engine::ConstTensorView x, const std::vector<int64_t>& rows,
                              engine::Stream& s);

// x (=): zero except rows `rows`, which get v [rows.size(), C].
void write_rows(engine::TensorView x, const std::vector<int64_t>& rows,
                const std::vector<double>& v, engine::Stream& s);

}  // namespace anvil::model
