// The checkpoint protocol of a training run (see run_loop.h).
#include "model/train/run_loop.h"

#include <algorithm>
#include <array>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "engine/stop_signals.h"
#include "model/train/kill_switch.h"
#include "model/train/loss_scaler.h"
#include "model/train/trainer.h"

namespace anvil::model {

absl::Status remove_stale_saves(const RunContext& run, const CheckpointFiles& files) {
  if (run.grid->rank() != 0 || run.cfg->checkpoint.save.empty()) return absl::OkStatus();
  ANVIL_ASSIGN_OR_RETURN(const std::vector<std::string> stale, files.remove_stale(run.token));
  for (const std::string& path : stale) {
    engine::log_info(run.ctx,
                     absl::StrCat("removed ", path, ", the leftover of an interrupted save"));
  }
  return absl::OkStatus();
}

absl::Status save_run_checkpoint(const RunContext& run, const CheckpointedModel& model,
                                 const CheckpointFiles& files) {
  engine::Stream cpu = engine::Stream::cpu();
  auto barrier = [&] {
    if (run.world != nullptr) run.world->barrier(cpu);
  };
  const TrainConfig& cfg = *run.cfg;
  const int64_t step = model.steps_done();
  const int rank = run.grid->rank();
  if (rank == 0) ANVIL_RETURN_IF_ERROR(files.begin(step, run.token));
  barrier();
  ANVIL_RETURN_IF_ERROR(
      files.write_shard(step, run.token, rank, model.slices(run.grid->dp_rank())));
  barrier();
  if (rank == 0) {
    const TrainerState state = model.state();
    CheckpointRecord r;
    r.step = step;
    r.config = run.config_text;
    r.model = checkpoint_model_record(cfg);
    r.state = checkpoint_counters(state, cfg);
    r.layout = checkpoint_layout(cfg);
    r.lr_schedule = checkpoint_lr_schedule(cfg, state);
    r.grad_scaler = loss_scaler_map(state.loss_scaler);
    r.attachments = run.attachments;
    ANVIL_RETURN_IF_ERROR(files.finish(step, run.token, run.grid->world(), r));
    ANVIL_RETURN_IF_ERROR(remove_stale_saves(run, files));
  }
  barrier();
  return absl::OkStatus();
}

absl::Status load_run_checkpoint(const RunContext& run, const CheckpointedModel& model,
                                 const CheckpointFiles& files) {
  const TrainConfig& cfg = *run.cfg;
  const CheckpointConfig& k = cfg.checkpoint;
  absl::StatusOr<OpenedCheckpoint> c =
      files.open_newest([&](const std::string& w) { engine::log_warning(run.ctx, w); });
  if (absl::IsNotFound(c.status())) {
    engine::log_warning(run.ctx, absl::StrCat(c.status().message(), ": starting from scratch"));
    return absl::OkStatus();
  }
  ANVIL_RETURN_IF_ERROR(c.status());
  ANVIL_RETURN_IF_ERROR(check_checkpoint_model(c->record.model, cfg, c->dir));
  if (!k.finetune &&
      std::none_of(c->tensor_names.begin(), c->tensor_names.end(),
                   [](const std::string& n) { return absl::StartsWith(n, kExpAvgState); })) {
    return absl::InvalidArgumentError(absl::StrCat(
        c->dir, " holds weights only (an import?): load it with [checkpoint] finetune = true"));
  }
  ANVIL_RETURN_IF_ERROR(model.load(c->read, k.finetune));
  std::string layout;
  for (const auto& [key, v] : c->record.layout) {
    absl::StrAppend(&layout, layout.empty() ? "; saved with " : ", ", key, " ", v);
  }
  if (k.finetune) {
    engine::log_info(run.ctx, absl::StrCat("finetune: weights of ", c->dir, layout,
                                           "; fresh optimizer, step 0"));
    return absl::OkStatus();
  }
  ANVIL_ASSIGN_OR_RETURN(TrainerState st, trainer_state_from(c->record.state, cfg));
  ANVIL_ASSIGN_OR_RETURN(st.loss_scaler, loss_scaler_from_map(c->record.grad_scaler));
  std::string note;
  ANVIL_ASSIGN_OR_RETURN(st.schedule,
                         resume_lr_schedule(c->record.lr_schedule, cfg, c->dir, &note));
  if (!note.empty()) engine::log_info(run.ctx, note);
  model.restore(st);
  if (const std::string changed = batch_change_note(st, cfg); !changed.empty()) {
    engine::log_warning(run.ctx, changed);
  }
  const int64_t samples = cfg.train.run_samples();
  auto saved = c->record.state.find("train_samples");
  if (saved != c->record.state.end() && saved->second != samples) {
    engine::log_warning(
        run.ctx,
        absl::StrFormat("the checkpoint's run had %d training samples ([train] train_samples "
                        "or steps x global_batch), this one has %d: the sample order (a "
                        "shuffle over the "
                        "whole run) differs from the one the checkpoint was trained on",
                        saved->second, samples));
  }
  engine::log_info(run.ctx, absl::StrFormat("resuming from %s: step %d, %d samples consumed%s",
                                            c->dir, st.step, st.consumed_samples, layout));
  return absl::OkStatus();
}

std::pair<int, bool> agree_on_stop(parallel::Comm* world, int64_t step, bool out_of_time) {
  std::array<double, 2> v = {static_cast<double>(engine::stop_signal_due(step)),
                             out_of_time ? 1.0 : 0.0};
  if (world != nullptr) {
    engine::Stream s = engine::Stream::cpu();
    world->all_reduce(engine::make_view(v.data(), engine::DType::kF64, engine::Device::kCpu,
                                        {static_cast<int64_t>(v.size())}),
                      parallel::ReduceOp::kMax, s);
  }
  return {static_cast<int>(v[0]), v[1] > 0};
}

void log_stop(const RunContext& run, int64_t step, int sig, bool out_of_time) {
  const CheckpointConfig& ck = run.cfg->checkpoint;
  const std::string why =
      sig > 0 ? absl::StrCat("received ", engine::stop_signal_name(sig))
      : out_of_time
          ? absl::StrFormat("[checkpoint] exit_duration_min %g reached", ck.exit_duration_min)
          : absl::StrFormat("[checkpoint] exit_interval %d reached", ck.exit_interval);
  engine::log_info(
      run.ctx, absl::StrFormat("%s: stopping after step %d%s", why, step,
                               ck.save.empty() ? " (no [checkpoint] save: nothing saved)" : ""));
}

RunEnd run_with_checkpoints(const RunContext& run, Trainer& tr, const CheckpointedModel& model,
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
