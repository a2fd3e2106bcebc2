// T5Model driven as a pipeline stage (see t5_stage.h).
#include "model/t5/t5_stage.h"

#include "absl/strings/str_cat.h"
#include "engine/status.h"

namespace anvil::model {

void T5PipelineStage::forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
                              uint64_t dropout_offset, engine::Stream& s) {
  ANVIL_CHECK_MSG(chunk == 0, absl::StrCat("T5 pipeline stage: chunk ", chunk,
                                           " (T5 runs one model chunk per stage)"));
  model_.set_batch(slot, batch_(micro_batch), s);
  model_.forward_stage(slot, train, dropout_offset, s);
}

void T5PipelineStage::backward(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& s) {
  ANVIL_CHECK_MSG(chunk == 0, absl::StrCat("T5 pipeline stage: chunk ", chunk,
                                           " (T5 runs one model chunk per stage)"));
  model_.backward_stage(slot, grad_scale, s);
}

}  // namespace anvil::model
