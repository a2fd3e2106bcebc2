// T5 (T5Model, model/t5/t5.h) as the shared trainer's Model (model/model.h): the rank's T5Shard
// (TP slice, pipeline stage of Megatron's split layout, activation slots of the step's 1F1B plan,
// ZeRO rank), the host micro-batches decoded from T5 records, the pipeline stage of
// model/t5/t5_stage.h, the shared parameters' copies summed over the pipeline, and the
// checkpoint tensors of model/t5/t5_checkpoint.h.
//
// Sample record of T5 (what a SampleFn writes for one sample, int32):
//   enc_tokens[Te] | dec_tokens[Td] | labels[Td] | enc_length[1]
// labels < 0 are not counted (io/t5_dataset's loss_mask folded in: -1 where it is 0);
// encoder tokens t >= enc_length are padding (io/t5_dataset pads at the end).
// The loss is Megatron's pretrain_t5.py: the mean over micro-batches of each one's mean over its
// loss-mask tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "model/model.h"
#include "model/t5/t5.h"
#include "model/t5/t5_stage.h"
#include "model/t5/t5_train_config.h"
#include "model/train/train_config.h"
#include "model/train/train_model.h"

namespace anvil::model {

// int32 entries of one T5 record.
inline int64_t t5_record_width(int64_t enc_len, int64_t dec_len) {
  return enc_len + 2 * dec_len + 1;
}

class T5TrainModel : public Model {
 public:
  // This rank's part of the model at grid coordinates (tp_rank, pp_rank, dp_rank): its TP slice,
  // pipeline stage, the activation slots of the step's 1F1B plan and its ZeRO rank (the
  // communicators are create()'s).
  static absl::StatusOr<T5Shard> stage_shard(const TrainConfig& cfg, int tp_rank, int pp_rank,
                                             int dp_rank);
  // T5Model's plan (t5_config(cfg), micro_batch x seq_len / decoder_seq_len) and on the CPU the
  // step's host micro-batches ("batch").
  static absl::StatusOr<engine::MemoryPlan> plan(const TrainConfig& cfg, const Precision& prec,
                                                 const T5Shard& shard = {});
  static absl::StatusOr<std::unique_ptr<T5TrainModel>> create(const TrainConfig& cfg,
                                                              const Precision& prec,
                                                              const ModelPlace& at);

  T5Model& t5() { return *model_; }

  int64_t slots() const override { return stage_->slots(); }
  int64_t chunks() const override { return 1; }
  bool ends_model() const override { return model_->ends_model(); }
  void forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
               uint64_t dropout_offset, engine::Stream& s) override {
    stage_->forward(chunk, slot, micro_batch, train, dropout_offset, s);
  }
  void backward(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& s) override {
    stage_->backward(chunk, slot, grad_scale, s);
  }
  double loss_sum(int64_t slot, engine::Stream& s) override { return model_->loss_sum(slot, s); }
  LossViews loss_views(int64_t slot) override { return model_->loss_views(slot); }
  std::vector<engine::TensorView> sent_activations(int64_t c) override {
    return stage_->sent_activations(c);
  }
  std::vector<engine::TensorView> received_activations(int64_t c, int64_t slot) override {
    return stage_->received_activations(c, slot);
  }
  std::vector<engine::TensorView> sent_grads(int64_t c) override { return stage_->sent_grads(c); }
  std::vector<engine::TensorView> received_grads(int64_t c, int64_t slot) override {
    return stage_->received_grads(c, slot);
  }

  ParamTable& params() override { return model_->params(); }
  size_t arena_bytes() const override;
  int64_t load_micro_batch(const SampleFn& samples, int64_t first_index, int64_t m) override;
  // T5 has no curriculum ([curriculum] is refused for it).
  void set_counted_tokens(int64_t n) override {
    ANVIL_CHECK_MSG(n == 0, "[curriculum] is not supported for T5");
  }
  bool per_micro_batch_mean() const override { return true; }
  int64_t tokens_per_sample() const override { return Te_ + Td_; }
  double flops_per_token() const override;
  void zero_grads(engine::Stream& s) override { model_->zero_grads(s); }
  void set_overlap_grad_sync(bool on) override { model_->set_overlap_grad_sync(on); }
  void finish_backward(engine::Stream& s) override { model_->finish_backward(s); }
  void sum_shared_grads(engine::Stream& s) override { model_->sum_shared_grads(pp_comm_, s); }
  void reduce_gradients(engine::Stream& s) override { model_->reduce_gradients(s); }
  double grad_sum_squares(engine::Stream& s) override { return model_->grad_sum_squares(s); }
  engine::ConstTensorView grad_sum_squares_device(engine::Stream& s) override {
    return model_->grad_sum_squares_device(s);
  }
  bool grad_squares_over_tp() const override { return true; }
  bool zero_sharded() const override { return model_->shard().zero_stage > 0; }
  void optimizer_step(const OptimizerStep& o, engine::Stream& s) override;
  engine::ConstTensorView last_logits() const override { return model_->last_logits(); }
  std::vector<engine::HostSlice> checkpoint_slices(int dp_rank, engine::Stream& s) override;
  absl::Status load_checkpoint(const TensorLookup& lookup, bool weights_only,
                               engine::Stream& s) override;

 private:
  T5TrainModel() = default;
  T5Batch host_batch(int64_t m) const;

  T5Config cfg_;
  int64_t B_ = 0, Te_ = 0, Td_ = 0;
  parallel::Comm* pp_comm_ = nullptr;
  std::unique_ptr<T5Model> model_;
  std::unique_ptr<T5PipelineStage> stage_;
  // Host micro-batches of one step: [accum * B * Te], [accum * B * Td] x 2, [accum * B].
  std::vector<int32_t> enc_, dec_, labels_, lengths_, record_;
};

// The T5Model of a trainer whose [model] type is t5 (a fatal CHECK otherwise).
T5Model& t5_model(Model& model);

}  // namespace anvil::model
