// Pipeline-parallel schedules (DESIGN.md §5, PP): which forward and backward each stage runs, in
// which order, and a lock-step round plan that says when every activation and gradient moves.
// Pure functions of (stages, stage, virtual_stages, micro_batches); no communication.
//
// Terms. A pipeline of P = `stages` ranks (stage s = pp rank) holds K = v * P model chunks
// (v = `virtual_stages`): global model chunk k = chunk * P + s lives on stage s = k % P as its
// local chunk k / P (Megatron's interleaved assignment; v = 1: chunk k = stage s). Micro-batches
// m = 0..M-1 flow F(m, 0) -> F(m, 1) -> ... -> F(m, K-1) -> B(m, K-1) -> ... -> B(m, 0).
//
// Schedules (the order of actions on one stage):
//   one_f_one_b_schedule  PipeDream-flush 1F1B (Megatron's forward_backward_pipelining_without_
//                         interleaving): min(P - s - 1, M) warmup forwards, then pairs F(m+w),
//                         B(m), then the remaining backwards. At most P - s activations live at
//                         once.
//   interleaved_schedule  Megatron's forward_backward_pipelining_with_interleaving: virtual
//                         micro-batch i (0..M*v-1) runs chunk (i mod P*v) / P forward, and chunk
//                         v - 1 - that backward, on micro-batch (i / (P*v)) * P + i mod P (groups
//                         of P micro-batches per chunk); warmup (P - s - 1) * 2 + (v - 1) * P
//                         forwards, capped at M*v, and, as in Megatron, all M*v when M == P; then
//                         pairs F(w + i), B(i); then the remaining backwards.
//
// Round plan (plan_pipeline): every stage executes its schedule in lock-step rounds. In round r a
// stage runs its next action if the action's input is there:
//   F(m, k) needs k == 0 or the activation of F(m, k-1) sent in an earlier round;
//   B(m, k) needs F(m, k) done on this stage and k == K-1 or the gradient of B(m, k+1) sent in an
//           earlier round;
// otherwise it idles that round and tries the same action in the next. At the end of the round in
// which F(m, k) ran, its output goes to the stage of chunk k+1 (k < K-1); at the end of the round
// in which B(m, k) ran, its input gradient goes to the stage of chunk k-1 (k > 0). Sends and
// recvs of a round are posted together (Comm::batch_p2p) on both sides in the same round. An
// executor that runs round r as "compute, then batch_p2p(sends + recvs)" cannot deadlock: the
// round-r batches of all stages match one another, and each stage reaches its round-r batch once
// its round-(r-1) batch completed. A message may arrive rounds before it is used: the receiver
// keeps it (keyed by micro-batch and model chunk) until its action runs. In a round a stage
// sends at most one message (it computes at most once) and receives at most one from each peer,
// so no two messages of one batch ever need matching by order (with P = 2 a stage may send to
// and receive from its one peer in the same batch).
//
// Bubble. With every action one round long, the round plan is the as-soon-as-possible execution
// of the schedules. 1F1B takes 2M + 2(P - 1) rounds: the last stage starts F(0) in round P - 1
// (the activation crosses P - 1 stages, one round each) and then alternates F and B without a gap
// (2M rounds); the first stage's last backward comes P - 1 rounds after the last stage's. Each
// stage computes in 2M of them and idles 2(P - 1): bubble fraction (P - 1) / (M + P - 1).
// Interleaved rounds are chunk-sized (1/v of a stage's layers): the plan takes 2Mv + 2(P - 1)
// rounds, each stage computes in 2Mv and idles 2(P - 1), i.e. 2(P - 1) / v stage-sized rounds:
// the bubble shrinks by v (Megatron's (P - 1) / (v M)), at the price of v times more messages
// and more activations in flight (its warmup runs (P - s - 1) * 2 + (v - 1) * P forwards).
// (Measured by this simulation for P <= 8, v <= 4 and M up to 5P; the tests check it.)
// The rounds are an order, not a timing: a real round lasts as long as the slowest compute it
// waits for through batch_p2p, and backward costs about twice forward.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::parallel {

enum class PipeOp { kForward, kBackward };

struct PipeAction {
  PipeOp op;
  int micro_batch;  // 0..M-1
  int chunk;        // local model chunk on this stage, 0..v-1 (global chunk * P + stage)
};
bool operator==(const PipeAction& a, const PipeAction& b);
inline bool operator!=(const PipeAction& a, const PipeAction& b) { return !(a == b); }
// "F(3, 1)" / "B(0, 0)": (micro_batch, chunk).
std::string to_string(const PipeAction& a);

// Global model chunk of local `chunk` on `stage`, and the stage that holds global chunk k.
inline int global_model_chunk(int stages, int stage, int chunk) { return chunk * stages + stage; }
inline int stage_of_model_chunk(int stages, int model_chunk) { return model_chunk % stages; }

// 1F1B on stage `stage` of `stages` (v = 1, chunk 0). CHECK-fails on stages < 1, stage outside
// [0, stages) or micro_batches < 0 (plan_pipeline validates its arguments first).
std::vector<PipeAction> one_f_one_b_schedule(int stages, int stage, int micro_batches);

// Megatron's interleaved schedule. InvalidArgument (naming the numbers) unless stages >= 2,
// 0 <= stage < stages, virtual_stages >= 2, micro_batches >= 1 and micro_batches % stages == 0.
absl::StatusOr<std::vector<PipeAction>> interleaved_schedule(int stages, int stage,
                                                             int virtual_stages, int micro_batches);

// One message of the round plan: activation = output of F(micro_batch, model_chunk), sent to
// the stage of model_chunk + 1; grad = input gradient of B(micro_batch, model_chunk), sent to the
// stage of model_chunk - 1. model_chunk is global (0..K-1). peer_stage: the other side (the
// receiver in `sends`, the sender in `recvs`).
struct PipeTransfer {
  bool is_grad;
  int micro_batch;
  int model_chunk;
  int peer_stage;
};
bool operator==(const PipeTransfer& a, const PipeTransfer& b);

struct PipeRound {
  std::optional<PipeAction> compute;       // this stage's action in this round, if any
  std::vector<PipeTransfer> sends, recvs;  // posted together at the end of the round
};

struct PipelinePlan {
  std::vector<PipeRound> rounds;  // for one stage; all stages have the same round count
  int max_live_activations = 0;   // max over rounds of (forwards done - backwards done)
};

// The round plan of `stage`: 1F1B when virtual_stages == 1, interleaved when >= 2.
// InvalidArgument for bad arguments (as the schedules; stages >= 1, micro_batches >= 1);
// Internal if the simulation deadlocks (never for these schedules).
absl::StatusOr<PipelinePlan> plan_pipeline(int stages, int stage, int virtual_stages,
                                           int micro_batches);

// The round plans of all stages for arbitrary schedules (schedules[s]: stage s's actions), e.g. a
// custom order. InvalidArgument unless every stage lists each (micro_batch, chunk) exactly once
// per op with indices in range; Internal naming each stage's blocked action if the schedules
// deadlock.
absl::StatusOr<std::vector<PipelinePlan>> simulate_pipeline(
    int stages, int virtual_stages, int micro_batches,
    const std::vector<std::vector<PipeAction>>& schedules);

}  // namespace anvil::parallel
