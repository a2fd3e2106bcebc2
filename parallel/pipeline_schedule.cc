// Pipeline schedules (1F1B, Megatron's interleaved order) and the lock-step round simulation
// that turns every stage's action list into rounds of compute + sends + recvs (see
// pipeline_schedule.h).
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "engine/status.h"

namespace anvil::parallel {
namespace {

PipeAction forward(int micro_batch, int chunk) {
  return PipeAction{PipeOp::kForward, micro_batch, chunk};
}
PipeAction backward(int micro_batch, int chunk) {
  return PipeAction{PipeOp::kBackward, micro_batch, chunk};
}

absl::Status check_stage(int stages, int stage, int micro_batches) {
  if (stages < 1 || stage < 0 || stage >= stages) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "pipeline: stage %d must lie in [0, %d) with at least one stage", stage, stages));
  }
  if (micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pipeline: %d micro-batches; need at least one", micro_batches));
  }
  return absl::OkStatus();
}

// Megatron's get_model_chunk_id and the micro-batch of virtual micro-batch i: chunks take turns
// in groups of `stages` micro-batches; backward visits the chunks in reverse.
PipeAction interleaved_action(int stages, int virtual_stages, int i, PipeOp op) {
  const int group = stages * virtual_stages;
  int chunk = (i % group) / stages;
  if (op == PipeOp::kBackward) chunk = virtual_stages - 1 - chunk;
  return PipeAction{op, (i / group) * stages + i % stages, chunk};
}

// Per-stage state of the lock-step simulation. Rounds are "done" times: an action that ran in
// round r has done[...] == r; kNever while it has not run.
constexpr int kNever = -1;

struct Sim {
  int stages, v, micro_batches, chunks;  // chunks = K = v * stages
  // fwd_done[k * M + m], bwd_done[k * M + m]: round in which F(m, k) / B(m, k) ran.
  std::vector<int> fwd_done, bwd_done;

  int& fwd(int m, int k) { return fwd_done[static_cast<size_t>(k) * micro_batches + m]; }
  int& bwd(int m, int k) { return bwd_done[static_cast<size_t>(k) * micro_batches + m]; }

  // Whether `a` on `stage` may run in round r (its inputs came in rounds before r).
  bool ready(int stage, const PipeAction& a, int r) {
    const int k = global_model_chunk(stages, stage, a.chunk);
    auto before = [r](int done) { return done != kNever && done < r; };
    if (a.op == PipeOp::kForward) return k == 0 || before(fwd(a.micro_batch, k - 1));
    return before(fwd(a.micro_batch, k)) && (k == chunks - 1 || before(bwd(a.micro_batch, k + 1)));
  }
};

absl::Status check_schedules(int stages, int v, int micro_batches,
                             const std::vector<std::vector<PipeAction>>& schedules) {
  if (static_cast<int>(schedules.size()) != stages) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pipeline: %d schedules for %d stages", schedules.size(), stages));
  }
  for (int s = 0; s < stages; ++s) {
    // seen[op][chunk * M + m]
    std::vector<int> seen[2] = {std::vector<int>(static_cast<size_t>(v) * micro_batches, 0),
                                std::vector<int>(static_cast<size_t>(v) * micro_batches, 0)};
    for (const PipeAction& a : schedules[s]) {
      if (a.micro_batch < 0 || a.micro_batch >= micro_batches || a.chunk < 0 || a.chunk >= v) {
        return absl::InvalidArgumentError(
            absl::StrFormat("pipeline: stage %d lists %s outside %d micro-batches x %d chunks", s,
                            to_string(a), micro_batches, v));
      }
      int& n = seen[a.op == PipeOp::kBackward]
                   [static_cast<size_t>(a.chunk) * micro_batches + a.micro_batch];
      if (++n > 1) {
        return absl::InvalidArgumentError(
            absl::StrFormat("pipeline: stage %d lists %s twice", s, to_string(a)));
      }
    }
    if (schedules[s].size() != 2 * static_cast<size_t>(v) * micro_batches) {
      return absl::InvalidArgumentError(
          absl::StrFormat("pipeline: stage %d lists %d actions, expected %d (every micro-batch "
                          "forward and backward on each of %d chunks)",
                          s, schedules[s].size(), 2 * v * micro_batches, v));
    }
  }
  return absl::OkStatus();
}

// Records the message of `a` (run on `stage` in its last round) on both sides of the plans.
void add_transfer(int stages, int chunks, int stage, const PipeAction& a,
                  std::vector<PipelinePlan>& plans) {
  const int k = global_model_chunk(stages, stage, a.chunk);
  const bool is_grad = a.op == PipeOp::kBackward;
  if ((!is_grad && k == chunks - 1) || (is_grad && k == 0)) return;  // nothing to send
  const int peer = stage_of_model_chunk(stages, is_grad ? k - 1 : k + 1);
  plans[stage].rounds.back().sends.push_back(PipeTransfer{is_grad, a.micro_batch, k, peer});
  plans[peer].rounds.back().recvs.push_back(PipeTransfer{is_grad, a.micro_batch, k, stage});
}

}  // namespace

bool operator==(const PipeAction& a, const PipeAction& b) {
  return a.op == b.op && a.micro_batch == b.micro_batch && a.chunk == b.chunk;
}

bool operator==(const PipeTransfer& a, const PipeTransfer& b) {
  return a.is_grad == b.is_grad && a.micro_batch == b.micro_batch &&
         a.model_chunk == b.model_chunk && a.peer_stage == b.peer_stage;
}

std::string to_string(const PipeAction& a) {
  return absl::StrFormat("%c(%d, %d)", a.op == PipeOp::kForward ? 'F' : 'B', a.micro_batch,
                         a.chunk);
}

std::vector<PipeAction> one_f_one_b_schedule(int stages, int stage, int micro_batches) {
  ANVIL_CHECK_MSG(stages >= 1 && stage >= 0 && stage < stages && micro_batches >= 0,
                  absl::StrFormat("one_f_one_b_schedule: stage %d of %d, %d micro-batches", stage,
                                  stages, micro_batches));
  const int warmup = std::min(stages - stage - 1, micro_batches);
  const int steady = micro_batches - warmup;
  std::vector<PipeAction> out;
  out.reserve(2 * static_cast<size_t>(micro_batches));
  for (int m = 0; m < warmup; ++m) out.push_back(forward(m, 0));
  for (int i = 0; i < steady; ++i) {
    out.push_back(forward(warmup + i, 0));
    out.push_back(backward(i, 0));
  }
  for (int m = steady; m < micro_batches; ++m) out.push_back(backward(m, 0));
  return out;
}

absl::StatusOr<std::vector<PipeAction>> interleaved_schedule(int stages, int stage,
                                                             int virtual_stages,
                                                             int micro_batches) {
  ANVIL_RETURN_IF_ERROR(check_stage(stages, stage, micro_batches));
  if (stages < 2 || virtual_stages < 2) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "interleaved pipeline schedule: needs at least 2 stages and 2 virtual stages, got %d "
        "stages and %d virtual stages (1F1B covers one model chunk per stage)",
        stages, virtual_stages));
  }
  if (micro_batches % stages != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "interleaved pipeline schedule: %d micro-batches are not divisible by %d pipeline stages",
        micro_batches, stages));
  }
  const int total = micro_batches * virtual_stages;
  // Megatron: with exactly `stages` micro-batches every forward runs before any backward.
  const int warmup =
      micro_batches == stages
          ? total
          : std::min((stages - stage - 1) * 2 + (virtual_stages - 1) * stages, total);
  const int steady = total - warmup;
  std::vector<PipeAction> out;
  out.reserve(2 * static_cast<size_t>(total));
  for (int i = 0; i < warmup; ++i) {
    out.push_back(interleaved_action(stages, virtual_stages, i, PipeOp::kForward));
  }
  for (int i = 0; i < steady; ++i) {
    out.push_back(interleaved_action(stages, virtual_stages, warmup + i, PipeOp::kForward));
    out.push_back(interleaved_action(stages, virtual_stages, i, PipeOp::kBackward));
  }
  for (int i = steady; i < total; ++i) {
    out.push_back(interleaved_action(stages, virtual_stages, i, PipeOp::kBackward));
  }
  return out;
}

absl::StatusOr<std::vector<PipelinePlan>> simulate_pipeline(
    int stages, int virtual_stages, int micro_batches,
    const std::vector<std::vector<PipeAction>>& schedules) {
  if (stages < 1 || virtual_stages < 1 || micro_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pipeline: %d stages, %d virtual stages, %d micro-batches: each must be "
                        "at least 1",
                        stages, virtual_stages, micro_batches));
  }
  ANVIL_RETURN_IF_ERROR(check_schedules(stages, virtual_stages, micro_batches, schedules));
  const int chunks = stages * virtual_stages;
  Sim sim{stages,
          virtual_stages,
          micro_batches,
          chunks,
          std::vector<int>(static_cast<size_t>(chunks) * micro_batches, kNever),
          std::vector<int>(static_cast<size_t>(chunks) * micro_batches, kNever)};
  std::vector<PipelinePlan> plans(static_cast<size_t>(stages));
  std::vector<size_t> next(static_cast<size_t>(stages), 0);  // next action per stage
  std::vector<int> live(static_cast<size_t>(stages), 0);
  size_t remaining = 0;
  for (const auto& s : schedules) remaining += s.size();

  for (int r = 0; remaining > 0; ++r) {
    // Decide every stage's action from the state before this round, then apply all of them:
    // what runs in round r becomes visible to others from round r + 1.
    std::vector<int> runs;
    for (int s = 0; s < stages; ++s) {
      if (next[s] < schedules[s].size() && sim.ready(s, schedules[s][next[s]], r)) {
        runs.push_back(s);
      }
    }
    if (runs.empty()) {
      std::vector<std::string> blocked;
      for (int s = 0; s < stages; ++s) {
        if (next[s] < schedules[s].size()) {
          blocked.push_back(
              absl::StrCat("stage ", s, " waits at ", to_string(schedules[s][next[s]])));
        }
      }
      return absl::InternalError(absl::StrCat("pipeline schedule deadlocks in round ", r, ": ",
                                              absl::StrJoin(blocked, ", ")));
    }
    for (PipelinePlan& p : plans) p.rounds.emplace_back();
    for (int s : runs) {
      const PipeAction a = schedules[s][next[s]++];
      --remaining;
      const int k = global_model_chunk(stages, s, a.chunk);
      if (a.op == PipeOp::kForward) {
        sim.fwd(a.micro_batch, k) = r;
        plans[s].max_live_activations = std::max(plans[s].max_live_activations, ++live[s]);
      } else {
        sim.bwd(a.micro_batch, k) = r;
        --live[s];
      }
      plans[s].rounds.back().compute = a;
      add_transfer(stages, chunks, s, a, plans);
    }
  }
  return plans;
}

absl::StatusOr<PipelinePlan> plan_pipeline(int stages, int stage, int virtual_stages,
                                           int micro_batches) {
  ANVIL_RETURN_IF_ERROR(check_stage(stages, stage, micro_batches));
  if (virtual_stages < 1) {
    return absl::InvalidArgumentError(
        absl::StrFormat("pipeline: %d virtual stages; need at least one", virtual_stages));
  }
  std::vector<std::vector<PipeAction>> schedules;
  for (int s = 0; s < stages; ++s) {
    if (virtual_stages == 1) {
      schedules.push_back(one_f_one_b_schedule(stages, s, micro_batches));
    } else {
      ANVIL_ASSIGN_OR_RETURN(std::vector<PipeAction> sched,
                             interleaved_schedule(stages, s, virtual_stages, micro_batches));
      schedules.push_back(std::move(sched));
    }
  }
  ANVIL_ASSIGN_OR_RETURN(std::vector<PipelinePlan> plans,
                         simulate_pipeline(stages, virtual_stages, micro_batches, schedules));
  return std::move(plans[static_cast<size_t>(stage)]);
}

}  // namespace anvil::parallel
