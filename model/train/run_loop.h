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
#include "engine/stop_signals.h"
#include "model/train/checkpoint.h"
#include "model/train/kill_switch.h"
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

// The trainer's side of a checkpoint (GPT's Trainer and T5's T5Trainer).
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
// saves the final state. TrainerT: Trainer or T5Trainer (until the one trainer).
template <typename TrainerT>
RunEnd run_with_checkpoints(const RunContext& run, TrainerT& tr, const CheckpointedModel& model,
                            const CheckpointFiles& files,
                            const std::function<double()>& seconds_since_start) {
  const CheckpointConfig& ck = run.cfg->checkpoint;
  const std::string& kill_switch = run.cfg->train.kill_switch_path;
  if (kill_switch_found(run.world, kill_switch)) {  // the fork: exit before anything, status 0
    engine::log_info(run.ctx, "detected kill switch at " + kill_switch + ": exiting");
    return {};
  }
  // Before anything is saved: a killed save may have left a whole checkpoint's bytes behind.
  if (absl::Status s = remove_stale_saves(run, files); !s.ok()) return {s, {}};
  if (!ck.load.empty()) {
    if (absl::Status s = load_run_checkpoint(run, model, files); !s.ok()) return {s, {}};
  }
  int64_t saved_step = ck.load.empty() ? -1 : tr.steps_done();
  absl::Status save_status;
  auto save = [&] {
    save_status = save_run_checkpoint(run, model, files);
    if (save_status.ok()) {
      saved_step = tr.steps_done();
      engine::log_info(run.ctx, "saved checkpoint " + files.step_dir(saved_step) + " at step " +
                                    std::to_string(saved_step));
    }
    return save_status.ok();
  };
  tr.set_step_hook([&](const StepStats& st) {
    // From here a signal stops the run after the next step (and its message says so); one that
    // came while step st.step was in flight stops it now. Announcing first, then reading, leaves
    // no moment where the message and the stop disagree.
    engine::set_step_in_flight(st.step + 1);
    const auto [sig, out_of_time] = agree_on_stop(
        run.world, st.step,
        ck.exit_duration_min > 0 && seconds_since_start() >= 60 * ck.exit_duration_min);
    const bool at_exit_interval = ck.exit_interval > 0 && st.step % ck.exit_interval == 0;
    const bool killed = kill_switch_found(run.world, kill_switch);
    const bool stop = sig > 0 || out_of_time || at_exit_interval || killed;
    const bool periodic = ck.save_interval > 0 && st.step % ck.save_interval == 0;
    if (!ck.save.empty() && (stop || periodic) && !save()) return true;
    if (killed) {
      engine::log_info(run.ctx, "detected kill switch at " + kill_switch + ": exiting after step " +
                                    std::to_string(st.step));
    } else if (stop) {
      log_stop(run, st.step, sig, out_of_time);
    }
    return stop;
  });
  engine::set_step_in_flight(tr.steps_done() + 1);
  const TrainSummary summary = tr.run();
  engine::set_step_in_flight(tr.steps_done());  // the final save's step
  if (!save_status.ok()) return {save_status, {}};
  // A diverged run ends without a final save: the newest checkpoint stays the last good one.
  // The gradient norm is the global batch's on every rank, so all ranks stop here together.
  if (!summary.status.ok()) return {{}, summary.status};
  if (!ck.save.empty() && saved_step != tr.steps_done() && !save()) return {save_status, {}};
  return {};
}

}  // namespace anvil::model
