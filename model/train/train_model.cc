// The family dispatch of the shared trainer (see train_model.h).
#include "model/train/train_model.h"

#include <utility>

#include "engine/status.h"
#include "model/train/gpt_train_model.h"
#include "model/train/t5_train_model.h"

namespace anvil::model {

absl::StatusOr<engine::MemoryPlan> train_model_plan(const TrainConfig& cfg,
                                                    const GptPrecision& prec,
                                                    const ModelPlace& at) {
  if (cfg.model.t5()) {
    ANVIL_ASSIGN_OR_RETURN(T5Shard shard,
                           T5TrainModel::stage_shard(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
    return T5TrainModel::plan(cfg, prec, shard);
  }
  ANVIL_ASSIGN_OR_RETURN(GptShard shard,
                         GptTrainModel::shard_for(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
  return GptTrainModel::plan(cfg, prec, shard);
}

absl::StatusOr<size_t> train_model_offload_bytes(const TrainConfig& cfg, const GptPrecision& prec,
                                                 const ModelPlace& at) {
  if (!cfg.parallel.offload_optimizer || cfg.model.t5()) return size_t{0};
  ANVIL_ASSIGN_OR_RETURN(GptShard shard,
                         GptTrainModel::shard_for(cfg, at.tp_rank, at.pp_rank, at.dp_rank));
  return GptModel::offload_host_bytes(cfg.model, {cfg.train.micro_batch, cfg.data.seq_len}, prec,
                                      shard);
}

absl::StatusOr<std::unique_ptr<Model>> create_train_model(const TrainConfig& cfg,
                                                          const GptPrecision& prec,
                                                          const ModelPlace& at) {
  if (cfg.model.t5()) {
    ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<T5TrainModel> m, T5TrainModel::create(cfg, prec, at));
    return std::unique_ptr<Model>(std::move(m));
  }
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<GptTrainModel> m, GptTrainModel::create(cfg, prec, at));
  return std::unique_ptr<Model>(std::move(m));
}

bool uses_embedding_group(const TrainConfig& cfg) { return !cfg.model.t5(); }

}  // namespace anvil::model
