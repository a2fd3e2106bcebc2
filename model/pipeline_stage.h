// The part of a model one pipeline stage runs, as the pipeline runner
// (model/train/pipeline_runner.h) drives it: the forward of micro-batch m on local model chunk c
// into activation slot k, its backward, the loss of the stage that ends the model, and, for each
// direction, the tensors a chunk sends after its computation and where the matching tensors of a
// peer arrive. GPT sends one tensor each way ([B*T, d] hidden / its gradient); T5 sends the decoder
// hidden and the encoder output between decoder stages (model/t5/t5_stage.h). The lists of two
// neighbouring stages match one another in count, order, shape and dtype (they are posted as one
// Comm::batch_p2p, matched in list order).
#pragma once

#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::model {

// Where the loss of a slot's last forward lives on the device (the stage that ends the model):
//   loss sum = sum(token) + binary_weight * sum(binary)
// binary: BERT's per-sample binary (sop) losses, else empty.
struct LossViews {
  engine::ConstTensorView token;   // [n] f32/f64 per-target losses (0 where not counted)
  engine::ConstTensorView binary;  // [B] f32/f64, or empty
  double binary_weight = 0.0;
};

class PipelineStage {
 public:
  virtual ~PipelineStage() = default;

  // Activation slots per chunk (micro-batch m uses slot m % slots()).
  virtual int64_t slots() const = 0;
  // Model chunks held here (interleaved pipelines: more than one).
  virtual int64_t chunks() const = 0;
  // The last local chunk ends the model (its forward computes the loss).
  virtual bool ends_model() const = 0;

  // Loads micro-batch m's host inputs into (chunk, slot) and runs the chunk forward on them and
  // on what arrived in received_activations(chunk, slot).
  virtual void forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
                       uint64_t dropout_offset, engine::Stream& s) = 0;
  // Backward of (chunk, slot)'s training forward; the output gradient comes from the loss
  // (ends_model, last chunk) or from received_grads(chunk, slot). Parameter gradients += .
  virtual void backward(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& s) = 0;
  // Loss sum of the slot's last forward (ends_model only). Syncs.
  virtual double loss_sum(int64_t slot, engine::Stream& s) = 0;
  // The device views loss_sum reads (ends_model only; else empty), so that a step can sum them
  // on the device and read the sums once at its end (ops/loss_sums.h).
  virtual LossViews loss_views(int64_t slot) = 0;

  // What the last forward of `chunk` sends to the next stage (valid until the next forward).
  virtual std::vector<engine::TensorView> sent_activations(int64_t chunk) = 0;
  // Where the previous stage's activations for (chunk, slot) arrive.
  virtual std::vector<engine::TensorView> received_activations(int64_t chunk, int64_t slot) = 0;
  // What the last backward of `chunk` sends to the previous stage (valid until the next
  // backward).
  virtual std::vector<engine::TensorView> sent_grads(int64_t chunk) = 0;
  // Where the next stage's gradients for (chunk, slot) arrive.
  virtual std::vector<engine::TensorView> received_grads(int64_t chunk, int64_t slot) = 0;
};

}  // namespace anvil::model
