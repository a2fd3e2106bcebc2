// GPT and BERT (GptModel, model/stack/gpt.h) as the shared trainer's Model (model/model.h): the
// rank's GptShard of the grid coordinates, the host micro-batches decoded from the family's
// sample records (model/train/sample_record.h; GPT: Megatron's get_ltor_masks_and_position_ids
// under [data] eod_mask_loss, reset_position_ids, reset_attention_mask, and prefix_lm's prefixes
// (model/train/prefix_lm.h); packed T0/MTF rows: decode_mtf_record; BERT: decode_bert_record),
// the tied embedding's gradient summed over the embedding group, the checkpoint tensors of
// model/train/checkpoint.h, and BERT's loss parts.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/memory.h"
#include "model/model.h"
#include "model/stack/gpt.h"
#include "model/train/pipeline_runner.h"
#include "model/train/train_config.h"
#include "model/train/train_model.h"

namespace anvil::model {

class GptTrainModel : public Model {
 public:
  // The model part of grid coordinates (tp_rank, pp_rank, dp_rank) under cfg.parallel (no
  // comms set): layer chunks, pre/post, activation slots from the pipeline plan,
  // recomputation, the ZeRO-1 optimizer shard.
  static absl::StatusOr<GptShard> shard_for(const TrainConfig& cfg, int tp_rank, int pp_rank,
                                            int dp_rank);
  // GptModel's plan and on the CPU (where they share the model's memory) the step's host
  // micro-batches ("batch": tokens, targets, positions, segments; BERT: types too).
  static absl::StatusOr<engine::MemoryPlan> plan(const TrainConfig& cfg, const Precision& prec,
                                                 const GptShard& shard = {});
  // The model of cfg.model on this rank (initialized with cfg.train.seed).
  static absl::StatusOr<std::unique_ptr<GptTrainModel>> create(const TrainConfig& cfg,
                                                               const Precision& prec,
                                                               const ModelPlace& at);

  GptModel& gpt() { return *model_; }

  int64_t slots() const override { return stage_->slots(); }
  int64_t chunks() const override { return stage_->chunks(); }
  bool ends_model() const override { return stage_->ends_model(); }
  void forward(int64_t chunk, int64_t slot, int64_t micro_batch, bool train,
               uint64_t dropout_offset, engine::Stream& s) override {
    stage_->forward(chunk, slot, micro_batch, train, dropout_offset, s);
  }
  void backward(int64_t chunk, int64_t slot, float grad_scale, engine::Stream& s) override {
    stage_->backward(chunk, slot, grad_scale, s);
  }
  double loss_sum(int64_t slot, engine::Stream& s) override { return stage_->loss_sum(slot, s); }
  LossViews loss_views(int64_t slot) override { return stage_->loss_views(slot); }
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
  size_t arena_bytes() const override { return model_->arena_bytes(); }
  int64_t load_micro_batch(const SampleFn& samples, int64_t first_index, int64_t m) override;
  void set_counted_tokens(int64_t n) override { counted_tokens_ = n; }
  // With eod_mask_loss, BERT's masked-LM loss (Megatron's pretrain_bert) and prefix-LM
  // (pretrain_prefix_lm.py's loss_func: the mean over each micro-batch's loss mask) and MTF
  // (GPTModelPipe's CrossEntropy without a prefix mask type: the same mean).
  bool per_micro_batch_mean() const override {
    return data_.eod_mask_loss || cfg_.mlm_head() || data_.prefix_lm || data_.mtf;
  }
  // Prefix-LM: DataConfig::PrefixLmNormalizer (the fork's GPTModelPipe or GPTModel division).
  double loss_normalizer(int64_t m, int64_t counted) const override;
  int64_t tokens_per_sample() const override { return T_; }
  double flops_per_token() const override;
  bool reports_loss_parts() const override { return cfg_.mlm_head(); }
  bool has_binary_part() const override { return cfg_.binary_head; }
  double binary_loss_sum(int64_t slot, engine::Stream& s) override {
    return model_->binary_loss_sum(slot, s);
  }
  void zero_grads(engine::Stream& s) override { model_->zero_grads(s); }
  // Not under ZeRO (its reduce-scatters run after the backward).
  void set_overlap_grad_sync(bool on) override {
    if (!zero_sharded()) model_->set_overlap_grad_sync(on);
  }
  void finish_backward(engine::Stream& s) override { model_->finish_backward(s); }
  void sum_shared_grads(engine::Stream& s) override;
  void reduce_gradients(engine::Stream& s) override { model_->reduce_gradients(s); }
  double grad_sum_squares(engine::Stream& s) override { return model_->grad_sum_squares(s); }
  engine::ConstTensorView grad_sum_squares_device(engine::Stream& s) override {
    return model_->grad_sum_squares_device(s);
  }
  bool grad_squares_over_tp() const override { return false; }
  bool zero_sharded() const override { return model_->shard().zero_stage > 0; }
  void optimizer_step(const OptimizerStep& o, engine::Stream& s) override;
  std::vector<engine::HostSlice> checkpoint_slices(int dp_rank, engine::Stream& s) override;
  absl::Status load_checkpoint(const TensorLookup& lookup, bool weights_only,
                               engine::Stream& s) override;

 private:
  GptTrainModel() = default;
  GptBatch host_batch(int64_t m) const;

  GptConfig cfg_;
  DataConfig data_;
  int64_t B_ = 0, T_ = 0;
  int64_t counted_tokens_ = 0;  // [curriculum] truncation of this step; 0: none
  bool pairs_ = false;          // BERT sentence-pair records (SampleLayout::kBertPair)
  std::unique_ptr<GptModel> model_;
  std::unique_ptr<GptPipelineStage> stage_;
  parallel::Comm* embedding_comm_ = nullptr;
  // Host micro-batches of one step, [accumulation steps * B*T] each (BERT: token types; lengths_
  // and binary_ [accumulation steps * B]); sample_: one record (model/train/sample_record.h).
  std::vector<int32_t> tokens_, positions_, targets_, segments_, sample_;
  std::vector<int32_t> prefix_end_;  // prefix-LM: [accumulation steps * B*T]
  // reweight_loss_based_on_position_frequency: each token's weight [B*T] (the same for every
  // micro-batch) and, per host micro-batch, the weights' sum over its counted tokens.
  std::vector<float> loss_weights_;
  std::vector<double> weight_sums_;
  std::vector<int32_t> types_, lengths_, binary_;
};

// The GptModel of a trainer whose [model] type is gpt or bert (a fatal CHECK otherwise).
GptModel& gpt_model(Model& model);

}  // namespace anvil::model
