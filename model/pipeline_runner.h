// Runs micro-batches through this rank's part of the model by a pipeline round plan
// (parallel/pipeline_schedule.h): in each round the planned forward or backward of one model
// chunk, then the round's activation / gradient transfers as one Comm::batch_p2p over the
// pipeline group. Micro-batch m uses activation slot m % slots of each chunk; pipeline_slots
// gives the slots the plan needs (a slot is busy from the arrival of a micro-batch's input, or
// its embedding, until its backward), so the slots of live micro-batches never collide.
// Without pipeline parallelism (one stage) the plan is F(0) B(0) F(1) B(1) ... on slot 0 and
// there is nothing to send: the single-rank step runs through the same code.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "engine/stream.h"
#include "model/gpt.h"
#include "parallel/pipeline_schedule.h"

namespace anvil::parallel {
class Comm;
}

namespace anvil::model {

// Activation slots per chunk the plan of `stage` needs.
int64_t pipeline_slots(const parallel::PipelinePlan& plan, int stages, int stage);

// What the runner asks about micro-batch m (0..M-1) of the step.
struct MicroBatchFns {
  std::function<GptBatch(int64_t m)> batch;  // host inputs; valid until the step ends
  std::function<float(int64_t m)> grad_scale;
  std::function<uint64_t(int64_t m)> dropout_offset;
  std::function<void(int64_t m)> before_backward;  // optional; called before each backward
  // Optional; on the stage that ends the model, called right after micro-batch m's loss sum
  // was read from `slot` (where the slot's other results, e.g. BERT's binary loss, still are).
  std::function<void(int64_t m, int64_t slot)> after_loss;
};

// Forward and backward of every micro-batch of the plan (parameter gradients accumulate).
// pp: the pipeline group (null with one stage). Returns the loss sum of each micro-batch on the
// stage that ends the model (zeros elsewhere).
std::vector<double> run_pipeline_step(GptModel& model, const parallel::PipelinePlan& plan,
                                      int stages, int stage, parallel::Comm* pp,
                                      const MicroBatchFns& fns, engine::Stream& s);

// Forward only (evaluation, slot 0) of one micro-batch through every model chunk in order,
// passing activations with blocking transfers. Returns the loss sum on the stage that ends the
// model, 0 elsewhere.
double run_pipeline_forward(GptModel& model, int stages, int stage, parallel::Comm* pp,
                            const GptBatch& batch, engine::Stream& s);

}  // namespace anvil::model
