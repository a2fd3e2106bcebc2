// The family dispatch of the shared trainer (see train_model.h): through the model-family
// registry (model/train/family.h).
#include "model/train/train_model.h"

#include "model/train/family.h"

namespace anvil::model {

absl::StatusOr<engine::MemoryPlan> train_model_plan(const TrainConfig& cfg, const Precision& prec,
                                                    const ModelPlace& at) {
  return family_of(cfg).plan(cfg, prec, at);
}

absl::StatusOr<size_t> train_model_offload_bytes(const TrainConfig& cfg, const Precision& prec,
                                                 const ModelPlace& at) {
  return family_of(cfg).offload_bytes(cfg, prec, at);
}

absl::StatusOr<std::unique_ptr<Model>> create_train_model(const TrainConfig& cfg,
                                                          const Precision& prec,
                                                          const ModelPlace& at) {
  return family_of(cfg).create(cfg, prec, at);
}

bool uses_embedding_group(const TrainConfig& cfg) { return family_of(cfg).uses_embedding_group; }

}  // namespace anvil::model
