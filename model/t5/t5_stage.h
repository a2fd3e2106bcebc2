// T5Model as a pipeline stage (model/pipeline_stage.h), so the pipeline runner
// (model/train/pipeline_runner.h) drives T5 with the schedules it runs for GPT. One model chunk per
// stage (no interleaving); micro-batch m's host inputs come from `batch` on every stage (the
// encoder lengths mask attention on every stage). The transfers are T5Model's stage API (t5.h):
// encoder hidden between encoder stages, the encoder output into the first decoder stage, and
// (decoder hidden, encoder output) between decoder stages, with their gradients backwards.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "model/pipeline_stage.h"
#include "model/t5/t5.h"

namespace anvil::model {

class T5PipelineStage : public PipelineStage {
 public:
  T5PipelineStage(T5Model& model, int64_t slots, std::function<T5Batch(int64_t m)> batch)
      : model_(model), slots_(slots), batch_(std::move(batch)) {}
  int64_t slots() const override { return slots_; }
  int64_t chunks() const override { return 1; }
  bool ends_model() const override { return model_.ends_model(); }
  void forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
               uint64_t dropout_offset, engine::Stream& s) override;
  void backward(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& s) override;
  double loss_sum(int64_t slot, engine::Stream& s) override { return model_.loss_sum(slot, s); }
  LossViews loss_views(int64_t slot) override { return model_.loss_views(slot); }
  std::vector<engine::TensorView> sent_activations(int64_t) override {
    return model_.stage_outputs();
  }
  std::vector<engine::TensorView> received_activations(int64_t, int64_t slot) override {
    return model_.stage_inputs(slot);
  }
  std::vector<engine::TensorView> sent_grads(int64_t) override {
    return model_.stage_input_grads();
  }
  std::vector<engine::TensorView> received_grads(int64_t, int64_t slot) override {
    return model_.stage_output_grads(slot);
  }

 private:
  T5Model& model_;
  int64_t slots_;
  std::function<T5Batch(int64_t m)> batch_;
};

}  // namespace anvil::model
