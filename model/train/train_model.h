// The shared trainer's family dispatch (model/train/trainer.h): the memory plan and the Model
// (model/model.h) of [model] type on one rank of the grid, through the family registry
// (model/train/family.h).
#pragma once

#include <memory>

#include "absl/status/statusor.h"
#include "engine/memory.h"
#include "model/model.h"
#include "model/train/train_config.h"

namespace anvil::parallel {
class Comm;
}

namespace anvil::model {

// Where a rank's model sits: its grid coordinates and its groups' communicators on the model's
// device (null where the group has one rank; the embedding group: GPT's first and last stage).
struct ModelPlace {
  int tp_rank = 0, pp_rank = 0, dp_rank = 0;
  parallel::Comm *tp = nullptr, *pp = nullptr, *dp = nullptr, *embedding = nullptr;
};

// The model's memory plan on the rank at `at` (communicators unused), with the host
// micro-batches on the CPU.
absl::StatusOr<engine::MemoryPlan> train_model_plan(const TrainConfig& cfg, const Precision& prec,
                                                    const ModelPlace& at);
// Host bytes of the rank's optimizer offload ([parallel] offload_optimizer; 0 without it):
// pinned host memory on CUDA, outside train_model_plan's device plan (on the CPU the plan
// includes it as "offload (host)").
absl::StatusOr<size_t> train_model_offload_bytes(const TrainConfig& cfg, const Precision& prec,
                                                 const ModelPlace& at);
// Creates the rank's model (initialized with cfg.train.seed, identical on every rank).
absl::StatusOr<std::unique_ptr<Model>> create_train_model(const TrainConfig& cfg,
                                                          const Precision& prec,
                                                          const ModelPlace& at);
// Whether the family sums a tied parameter over the embedding group (GPT, BERT).
bool uses_embedding_group(const TrainConfig& cfg);

}  // namespace anvil::model
