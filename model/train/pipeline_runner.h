// Runs micro-batches through this rank's part of the model by a pipeline round plan
// (parallel/pipeline_schedule.h): in each round the planned forward or backward of one model
// chunk, then the round's activation / gradient transfers as one Comm::batch_p2p over the
// pipeline group. Micro-batch m uses activation slot m % slots of each chunk; pipeline_slots
// gives the slots the plan needs (a slot is busy from the arrival of a micro-batch's input, or
// its embedding, until its backward), so the slots of live micro-batches never collide.
// Without pipeline parallelism (one stage) the plan is F(0) B(0) F(1) B(1) ... on slot 0 and
// there is nothing to send: the single-rank step runs through the same code.
// The runner drives any PipelineStage (model/pipeline_stage.h); GptPipelineStage adapts GptModel
// and the GptModel overloads below are that adapter (T5: model/t5/t5_stage.h).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "engine/stream.h"
#include "model/pipeline_stage.h"
#include "model/stack/gpt.h"
#include "parallel/pipeline_schedule.h"

namespace anvil::parallel {
class Comm;
}

namespace anvil::model {

// Activation slots per chunk the plan of `stage` needs.
int64_t pipeline_slots(const parallel::PipelinePlan& plan, int stages, int stage);

// What the runner asks about micro-batch m (0..M-1) of the step.
struct PipelineStepFns {
  std::function<float(int64_t m)> grad_scale;
  std::function<uint64_t(int64_t m)> dropout_offset;
  std::function<void(int64_t m)> before_backward;  // optional; called before each backward
  // Optional; on the stage that ends the model, called with micro-batch m's loss views (right
  // after its backward is queued) instead of reading its loss sum: no sync, and the returned
  // sum is then 0.
  std::function<void(int64_t m, const LossViews& views)> add_loss;
};

// Forward and backward of every micro-batch of the plan (parameter gradients accumulate).
// pp: the pipeline group (null with one stage). Returns the loss sum of each micro-batch on the
// stage that ends the model (zeros elsewhere).
std::vector<double> run_pipeline_step(PipelineStage& stage, const parallel::PipelinePlan& plan,
                                      int stages, int stage_index, parallel::Comm* pp,
                                      const PipelineStepFns& fns, engine::Stream& s);

// Forward only (evaluation, slot 0) of micro-batch 0 through every model chunk in order,
// passing activations with blocking transfers. Returns the loss sum on the stage that ends the
// model, 0 elsewhere.
double run_pipeline_forward(PipelineStage& stage, int stages, int stage_index, parallel::Comm* pp,
                            engine::Stream& s);

// GptModel as a pipeline stage: one [B*T, d] tensor each way; micro-batch m's inputs from
// `batch` (valid until the step ends).
class GptPipelineStage : public PipelineStage {
 public:
  GptPipelineStage(GptModel& model, std::function<GptBatch(int64_t m)> batch)
      : model_(model), batch_(std::move(batch)) {}
  int64_t slots() const override { return model_.shard().act_slots; }
  int64_t chunks() const override;
  bool ends_model() const override { return model_.shard().post; }
  void forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
               uint64_t dropout_offset, engine::Stream& s) override;
  void backward(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& s) override {
    model_.backward_chunk(chunk, slot, grad_scale, s);
  }
  double loss_sum(int64_t slot, engine::Stream& s) override { return model_.loss_sum(slot, s); }
  LossViews loss_views(int64_t slot) override { return model_.loss_views(slot); }
  std::vector<engine::TensorView> sent_activations(int64_t) override {
    return {model_.chunk_output()};
  }
  std::vector<engine::TensorView> received_activations(int64_t chunk, int64_t slot) override {
    return {model_.chunk_input(chunk, slot)};
  }
  std::vector<engine::TensorView> sent_grads(int64_t) override {
    return {model_.chunk_input_grad()};
  }
  std::vector<engine::TensorView> received_grads(int64_t chunk, int64_t slot) override {
    return {model_.chunk_output_grad(chunk, slot)};
  }

 private:
  GptModel& model_;
  std::function<GptBatch(int64_t m)> batch_;
};

// GPT's micro-batch inputs with the step's functions.
struct MicroBatchFns : PipelineStepFns {
  std::function<GptBatch(int64_t m)> batch;  // host inputs; valid until the step ends
};

// run_pipeline_step / run_pipeline_forward over GptPipelineStage(model, ...).
std::vector<double> run_pipeline_step(GptModel& model, const parallel::PipelinePlan& plan,
                                      int stages, int stage, parallel::Comm* pp,
                                      const MicroBatchFns& fns, engine::Stream& s);
double run_pipeline_forward(GptModel& model, int stages, int stage, parallel::Comm* pp,
                            const GptBatch& batch, engine::Stream& s);

}  // namespace anvil::model
