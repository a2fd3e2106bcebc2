// A training run with checkpoints ([checkpoint], docs/checkpoints.md), on every rank alike: the
// distributed save protocol (rank 0 opens a temporary directory, every rank writes its boxes,
// rank 0 writes the manifest and commits, with a barrier between the phases), the resume
// (weights only with finetune), and the loop that stops every rank at the same step (a stop
// signal, exit_interval or exit_duration_min agreed on over the world), saves periodically and at
// the end. model/ never touches a file: the binary binds CheckpointFiles to io/checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/host_slice.h"
#include "engine/log.h"
#include "model/train/checkpoint.h"
#include "model/train/train_config.h"
#include "model/train/trainer.h"
#include "parallel/comm.h"
#include "parallel/grid.h"

namespace anvil::model {

// What a checkpoint records beside its tensors (io::CheckpointInfo's fields; see there).
struct CheckpointRecord {
  int64_t step = 0;
  std::string config;
  std::map<std::string, int64_t> state, layout;
  std::map<std::string, double> lr_schedule, grad_scaler;
  std::map<std::string, std::string> model, attachments;
};

// A complete checkpoint opened for a resume.
struct OpenedCheckpoint {
  std::string dir;
  CheckpointRecord record;
  std::vector<std::string> tensor_names;
  TensorLookup read;
};

// The files side (bin/train: io/checkpoint.h over [checkpoint] save and load).
struct CheckpointFiles {
  // Save, in this order: begin (rank 0: the temporary directory of `token`), write_shard (every
  // rank), finish (rank 0: manifest, commit, keep_last).
  std::function<absl::Status(int64_t step, const std::string& token)> begin;
  std::function<absl::Status(int64_t step, const std::string& token, int rank,
                             const std::vector<engine::HostSlice>& slices)>
      write_shard;
  std::function<absl::Status(int64_t step, const std::string& token, int world,
                             const CheckpointRecord& record)>
      finish;
  // Rank 0: removes the leftover temporaries of interrupted saves (of processes that are gone,
  // never `token`'s) and returns their paths; called at the start of a run and after each save.
  std::function<absl::StatusOr<std::vector<std::string>>(const std::string& token)> remove_stale;
  std::function<std::string(int64_t step)> step_dir;  // where step's checkpoint is committed
  // The newest complete checkpoint to load (NotFound: none at all); warn reports each refused.
  std::function<absl::StatusOr<OpenedCheckpoint>(const std::function<void(const std::string&)>&)>
      open_newest;
};

// The trainer's side of a checkpoint (model/train/trainer.h).
struct CheckpointedModel {
  std::function<std::vector<engine::HostSlice>(int dp_rank)> slices;
  std::function<absl::Status(const TensorLookup& lookup, bool weights_only)> load;
  std::function<int64_t()> steps_done;
  std::function<TrainerState()> state;
  std::function<void(const TrainerState&)> restore;
};

// The ranks' shared facts of a run.
struct RunContext {
  const TrainConfig* cfg = nullptr;
  std::string config_text;                         // the effective ini, kept in the checkpoint
  std::map<std::string, std::string> attachments;  // files kept with it (the tokenizer's)
  const parallel::ProcessGrid* grid = nullptr;
  parallel::Comm* world = nullptr;  // null: one rank
  std::string token;                // the same on every rank (rank 0's pid): the temporary's name
  engine::LogContext ctx;
};

// Rank 0, when the run saves: removes the leftovers of interrupted saves into
// cfg.checkpoint.save (files.remove_stale), logging each.
absl::Status remove_stale_saves(const RunContext& run, const CheckpointFiles& files);
// Saves the model's state into cfg.checkpoint.save (collective over the world).
absl::Status save_run_checkpoint(const RunContext& run, const CheckpointedModel& model,
                                 const CheckpointFiles& files);
// Loads [checkpoint] load (weights only with finetune); a directory without any checkpoint
// starts from scratch with a warning.
absl::Status load_run_checkpoint(const RunContext& run, const CheckpointedModel& model,
                                 const CheckpointFiles& files);

// The world's element-wise max of the two stop reasons of step `step` (a stop signal's number,
// out of time), every rank calling it.
std::pair<int, bool> agree_on_stop(parallel::Comm* world, int64_t step, bool out_of_time);

// The stop's log line ("received SIGTERM: stopping after step 12", naming what was saved).
void log_stop(const RunContext& run, int64_t step, int sig, bool out_of_time);

// How a run ended: fatal (a rank-local error: the binary ends every rank) or shared (every rank
// has it, e.g. a diverged run: each exits with it), or neither.
struct RunEnd {
  absl::Status fatal, shared;
};

// Loads [checkpoint] load, runs `tr` to the end saving every save_interval steps and when a stop
// (signal, exit_interval, exit_duration_min after `seconds_since_start()` minutes) ends it, then
// saves the final state.
RunEnd run_with_checkpoints(const RunContext& run, Trainer& tr, const CheckpointedModel& model,
                            const CheckpointFiles& files,
                            const std::function<double()>& seconds_since_start);

}  // namespace anvil::model
