// T5 as the trainer's Model (see t5_train_model.h): its shard, plan, host micro-batches and
// step hooks, moved out of the former T5-only trainer unchanged.
#include "model/t5/t5_train_model.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_format.h"
#include "engine/checked_math.h"
#include "engine/status.h"
#include "model/t5/t5_checkpoint.h"
#include "model/train/family.h"
#include "model/train/pipeline_runner.h"

namespace anvil::model {

absl::StatusOr<T5Shard> T5TrainModel::stage_shard(const TrainConfig& cfg, int tp_rank, int pp_rank,
                                                  int dp_rank) {
  const parallel::ParallelConfig& pc = cfg.parallel;
  T5Shard shard;
  shard.tp = pc.tp;
  shard.tp_rank = tp_rank;
  shard.pp = pc.pp;
  shard.pp_rank = pp_rank;
  shard.pp_split = pc.pp_split_rank;
  shard.sequence_parallel = pc.sequence_parallel;
  shard.recompute = recompute_from_name(pc.recompute);
  // 1F1B over the micro-batches of a step on one DP rank (one stage: F(0) B(0) F(1) B(1) ...).
  ANVIL_ASSIGN_OR_RETURN(
      parallel::PipelinePlan plan,
      parallel::plan_pipeline(pc.pp, pp_rank, 1,
                              static_cast<int>(cfg.train.accumulation_steps(pc.dp))));
  shard.act_slots = pipeline_slots(plan, pc.pp, shard.pp_rank);
  // ZeRO shards over the DP group whenever there is one (dp > 1, or reduce_single_rank).
  if (pc.zero_stage > 0 && (pc.dp > 1 || pc.reduce_single_rank)) {
    shard.zero_stage = pc.zero_stage;
    shard.zero_dp = pc.dp;
    shard.zero_rank = dp_rank;
  }
  shard.offload_optimizer = pc.offload_optimizer;
  shard.offload_threads = pc.offload_threads;
  ANVIL_RETURN_IF_ERROR(shard.validate(t5_config(cfg)));
  return shard;
}

absl::StatusOr<engine::MemoryPlan> T5TrainModel::plan(const TrainConfig& cfg, const Precision& prec,
                                                      const T5Shard& shard) {
  const int64_t B = cfg.train.micro_batch, Te = cfg.data.seq_len, Td = cfg.data.decoder_seq_len;
  ANVIL_ASSIGN_OR_RETURN(engine::MemoryPlan plan,
                         T5Model::plan(t5_config(cfg), {B, Te, Td}, prec, shard));
  if (prec.device == engine::Device::kCpu && shard.offload_optimizer) {
    // The offloaded optimizer state shares the host with everything else on the CPU.
    ANVIL_ASSIGN_OR_RETURN(size_t bytes,
                           T5Model::offload_host_bytes(t5_config(cfg), {B, Te, Td}, prec, shard));
    plan.add("offload (host)", "offloaded master, adamw m / v, staging", bytes);
  }
  if (prec.device == engine::Device::kCpu) {
    // create()'s i32 arrays of the accumulation steps' micro-batches and one record.
    const int64_t accum = std::max<int64_t>(cfg.train.accumulation_steps(cfg.parallel.dp), 1);
    const size_t ints = static_cast<size_t>(accum * B * (Te + 2 * Td + 1)) +
                        static_cast<size_t>(family_of(cfg).record_width(cfg));
    plan.add("batch", "host micro-batches", engine::saturating_mul(sizeof(int32_t), ints));
  }
  return plan;
}

absl::StatusOr<std::unique_ptr<T5TrainModel>> T5TrainModel::create(const TrainConfig& cfg,
                                                                   const Precision& prec,
                                                                   const ModelPlace& at) {
  if (cfg.family != "t5") return absl::InvalidArgumentError("T5TrainModel: [model] type is not t5");
  const parallel::ParallelConfig& pc = cfg.parallel;
  ANVIL_ASSIGN_OR_RETURN(T5Shard shard, stage_shard(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
  shard.tp_comm = at.tp;
  // The model reduces its gradients over DP itself (parallel/grad_sync.h).
  shard.dp_comm = at.dp;
  shard.dp_bucket_elems = pc.bucket_mb > 0 ? pc.bucket_elems() : 0;
  std::unique_ptr<T5TrainModel> t(new T5TrainModel());
  t->cfg_ = t5_config(cfg);
  t->pp_comm_ = at.pp;
  const int64_t B = cfg.train.micro_batch, Te = cfg.data.seq_len, Td = cfg.data.decoder_seq_len;
  t->B_ = B;
  t->Te_ = Te;
  t->Td_ = Td;
  ANVIL_ASSIGN_OR_RETURN(t->model_,
                         T5Model::create(t5_config(cfg), {B, Te, Td}, prec, cfg.train.seed, shard));
  T5TrainModel* self = t.get();
  t->stage_ = std::make_unique<T5PipelineStage>(*t->model_, shard.act_slots,
                                                [self](int64_t m) { return self->host_batch(m); });
  const size_t accum =
      static_cast<size_t>(std::max<int64_t>(cfg.train.accumulation_steps(pc.dp), 1));
  t->enc_.assign(accum * static_cast<size_t>(B * Te), 0);
  t->dec_.assign(accum * static_cast<size_t>(B * Td), 0);
  t->labels_.assign(accum * static_cast<size_t>(B * Td), -1);
  t->lengths_.assign(accum * static_cast<size_t>(B), 0);
  t->record_.assign(static_cast<size_t>(family_of(cfg).record_width(cfg)), 0);
  return t;
}

size_t T5TrainModel::arena_bytes() const { return model_->arena_bytes(); }

double T5TrainModel::flops_per_token() const {
  // 6 FLOPs per matmul parameter for every token that passes it (the encoder's Te, the
  // decoder's and the LM head's Td) and 12 per attention score element and head width (q k^T
  // and the weighted sum, forward and backward), per (encoder + decoder) token of a sample.
  const double d = static_cast<double>(cfg_.d_model), i = static_cast<double>(cfg_.inner());
  const double Te = static_cast<double>(Te_), Td = static_cast<double>(Td_);
  const double enc_layer =
      4 * d * i + static_cast<double>(cfg_.wi_out()) * d + d * static_cast<double>(cfg_.d_ff);
  const double dec_layer = enc_layer + 4 * d * i;
  const double Le = static_cast<double>(cfg_.n_encoder_layers);
  const double Ld = static_cast<double>(cfg_.n_decoder_layers);
  const double head = static_cast<double>(cfg_.padded()) * d;
  const double matmuls = 6.0 * (Le * enc_layer * Te + (Ld * dec_layer + head) * Td);
  const double attention = 12.0 * i * (Le * Te * Te + Ld * (Td * Td + Td * Te));
  return (matmuls + attention) / (Te + Td);
}

int64_t T5TrainModel::load_micro_batch(const SampleFn& fn, int64_t first, int64_t m) {
  const int64_t B = B_, Te = Te_, Td = Td_;
  const int64_t vocab = cfg_.vocab_size;
  int64_t counted = 0;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t index = first + b;
    fn(index, record_.data());
    const int32_t* enc = record_.data();
    const int32_t* dec = enc + Te;
    const int32_t* labels = dec + Td;
    const int32_t length = labels[Td];
    ANVIL_CHECK_MSG(length >= 1 && length <= Te,
                    absl::StrFormat("T5 sample %d: encoder length %d outside [1, seq_len %d]",
                                    index, length, Te));
    for (int64_t i = 0; i < Te + 2 * Td; ++i) {
      const int32_t id = record_[static_cast<size_t>(i)];
      const bool label = i >= Te + Td;
      ANVIL_CHECK_MSG(id < vocab && (id >= 0 || (label && id == -1)),
                      absl::StrFormat("T5 sample %d holds id %d at record entry %d, outside "
                                      "[model] vocab_size %d",
                                      index, id, i, vocab));
    }
    const size_t row = static_cast<size_t>(m * B + b);
    std::copy(enc, enc + Te, enc_.begin() + static_cast<std::ptrdiff_t>(row * Te));
    std::copy(dec, dec + Td, dec_.begin() + static_cast<std::ptrdiff_t>(row * Td));
    std::copy(labels, labels + Td, labels_.begin() + static_cast<std::ptrdiff_t>(row * Td));
    lengths_[row] = length;
    counted += std::count_if(labels, labels + Td, [](int32_t x) { return x >= 0; });
  }
  return counted;
}

T5Batch T5TrainModel::host_batch(int64_t m) const {
  const size_t B = static_cast<size_t>(B_), Te = static_cast<size_t>(Te_);
  const size_t Td = static_cast<size_t>(Td_);
  const size_t r = static_cast<size_t>(m) * B;
  return {enc_.data() + r * Te, dec_.data() + r * Td, labels_.data() + r * Td, lengths_.data() + r};
}

void T5TrainModel::optimizer_step(const OptimizerStep& o, engine::Stream& s) {
  model_->optimizer_step(o, s);
}

std::vector<engine::HostSlice> T5TrainModel::checkpoint_slices(int dp_rank, engine::Stream& s) {
  return t5_checkpoint_slices(*model_, dp_rank, s);
}

absl::Status T5TrainModel::load_checkpoint(const TensorLookup& lookup, bool weights_only,
                                           engine::Stream& s) {
  return t5_load_checkpoint(*model_, lookup, weights_only, s);
}

T5Model& t5_model(Model& model) {
  auto* m = dynamic_cast<T5TrainModel*>(&model);
  ANVIL_CHECK_MSG(m != nullptr, "t5_model: the trainer's model is not T5");
  return m->t5();
}

}  // namespace anvil::model
