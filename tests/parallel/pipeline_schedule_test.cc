// Pipeline schedules and round plans (parallel/pipeline_schedule.h), checked against
// independent references: action orders written out by hand from Megatron's algorithms, round
// numbers from a longest-path computation over the dependency DAG (not the round simulation),
// the closed forms of the lock-step model, and cross-stage consistency of every message.
// Pure functions: every rank of the MPI test main runs the same checks without communicating.
#include "parallel/pipeline_schedule.h"

#include <algorithm>
#include <functional>
#include <map>
#include <ostream>
#include <set>
#include <tuple>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::parallel {

// gtest prints actions as "F(m, chunk)".
void PrintTo(const PipeAction& a, std::ostream* os) { *os << to_string(a); }

namespace {

using testing::ElementsAreArray;
using testing::HasSubstr;

PipeAction F(int m, int chunk = 0) { return PipeAction{PipeOp::kForward, m, chunk}; }
PipeAction B(int m, int chunk = 0) { return PipeAction{PipeOp::kBackward, m, chunk}; }

std::vector<PipeAction> schedule(int stages, int stage, int v, int micro_batches) {
  if (v == 1) return one_f_one_b_schedule(stages, stage, micro_batches);
  auto s = interleaved_schedule(stages, stage, v, micro_batches);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? *s : std::vector<PipeAction>{};
}

std::vector<PipelinePlan> all_plans(int stages, int v, int micro_batches) {
  std::vector<PipelinePlan> plans;
  for (int s = 0; s < stages; ++s) {
    auto p = plan_pipeline(stages, s, v, micro_batches);
    EXPECT_TRUE(p.ok()) << p.status();
    plans.push_back(p.ok() ? *p : PipelinePlan{});
  }
  return plans;
}

int busy_rounds(const PipelinePlan& p) {
  return static_cast<int>(std::count_if(p.rounds.begin(), p.rounds.end(),
                                        [](const PipeRound& r) { return r.compute.has_value(); }));
}

// (P, v, M) layouts the property tests sweep: 1F1B for any M >= 1 (also M < P), interleaved
// for M a multiple of P (M == P included: Megatron's all-forwards-first case).
std::vector<std::tuple<int, int, int>> layouts() {
  std::vector<std::tuple<int, int, int>> out;
  for (int p : {1, 2, 3, 4, 5, 8}) {
    for (int m : {1, 2, 3, 4, 5, 7, 8, 12, 16}) out.emplace_back(p, 1, m);
  }
  for (int p : {2, 3, 4, 8}) {
    for (int v : {2, 3, 4}) {
      for (int mult : {1, 2, 3, 5}) out.emplace_back(p, v, p * mult);
    }
  }
  return out;
}

TEST(PipelineScheduleTest, OneFOneBOrderMatchesHandWrittenList) {
  // 4 stages, 6 micro-batches. Stage 0: 3 warmup forwards, 3 F/B pairs, 3 cooldown backwards.
  EXPECT_THAT(
      one_f_one_b_schedule(4, 0, 6),
      ElementsAreArray({F(0), F(1), F(2), F(3), B(0), F(4), B(1), F(5), B(2), B(3), B(4), B(5)}));
  // Stage 1: 2 warmup forwards.
  EXPECT_THAT(
      one_f_one_b_schedule(4, 1, 6),
      ElementsAreArray({F(0), F(1), F(2), B(0), F(3), B(1), F(4), B(2), F(5), B(3), B(4), B(5)}));
  // Last stage: no warmup, strict alternation.
  EXPECT_THAT(
      one_f_one_b_schedule(4, 3, 6),
      ElementsAreArray({F(0), B(0), F(1), B(1), F(2), B(2), F(3), B(3), F(4), B(4), F(5), B(5)}));
  // Fewer micro-batches than the warmup: all forwards, then all backwards.
  EXPECT_THAT(one_f_one_b_schedule(4, 0, 2), ElementsAreArray({F(0), F(1), B(0), B(1)}));
}

TEST(PipelineScheduleTest, InterleavedOrderMatchesMegatronWorkedByHand) {
  // Megatron, pipeline 2, 2 model chunks, 4 micro-batches: 8 virtual micro-batches i.
  // get_model_chunk_id(i, forward) = (i % 4) / 2; backward: 1 - that. The n-th forward on a
  // chunk takes micro-batch n, so i -> (micro-batch, chunk) is
  //   forward:  0:(0,0) 1:(1,0) 2:(0,1) 3:(1,1) 4:(2,0) 5:(3,0) 6:(2,1) 7:(3,1)
  //   backward: 0:(0,1) 1:(1,1) 2:(0,0) 3:(1,0) 4:(2,1) 5:(3,1) 6:(2,0) 7:(3,0)
  // Stage 0: warmup (2-0-1)*2 + (2-1)*2 = 4 forwards, 4 pairs F(4+k) B(k), cooldown B(4..7).
  EXPECT_THAT(*interleaved_schedule(2, 0, 2, 4),
              ElementsAreArray({F(0, 0), F(1, 0), F(0, 1), F(1, 1),                    // warmup
                                F(2, 0), B(0, 1), F(3, 0), B(1, 1), F(2, 1), B(0, 0),  // steady
                                F(3, 1), B(1, 0),                                      //
                                B(2, 1), B(3, 1), B(2, 0), B(3, 0)}));                 // cooldown
  // Stage 1: warmup 0*2 + 2 = 2 forwards, 6 pairs, cooldown B(6), B(7).
  EXPECT_THAT(*interleaved_schedule(2, 1, 2, 4),
              ElementsAreArray({F(0, 0), F(1, 0),                                      // warmup
                                F(0, 1), B(0, 1), F(1, 1), B(1, 1), F(2, 0), B(0, 0),  // steady
                                F(3, 0), B(1, 0), F(2, 1), B(2, 1), F(3, 1), B(3, 1),  //
                                B(2, 0), B(3, 0)}));                                   // cooldown
}

TEST(PipelineScheduleTest, InterleavedRunsAllForwardsFirstWhenMicroBatchesEqualStages) {
  // Megatron's special case (num_microbatches == pipeline size): warmup = all M*v forwards on
  // every stage, although the formula alone would give the last stage (v-1)*P = 4.
  const std::vector<PipeAction> s = *interleaved_schedule(4, 3, 2, 4);
  ASSERT_EQ(s.size(), 16u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(s[i].op, PipeOp::kForward) << i;
  EXPECT_EQ(s[8], B(0, 1));
  EXPECT_EQ(s[15], B(3, 0));
}

TEST(PipelineScheduleTest, EveryActionOnceAndForwardBeforeBackward) {
  for (auto [p, v, m] : layouts()) {
    for (int s = 0; s < p; ++s) {
      SCOPED_TRACE(testing::Message() << "P=" << p << " v=" << v << " M=" << m << " stage " << s);
      const std::vector<PipeAction> acts = schedule(p, s, v, m);
      ASSERT_EQ(acts.size(), 2u * v * m);
      std::map<std::pair<int, int>, int> fwd_at, bwd_at;  // (m, chunk) -> position
      for (int i = 0; i < static_cast<int>(acts.size()); ++i) {
        const PipeAction& a = acts[i];
        ASSERT_TRUE(a.micro_batch >= 0 && a.micro_batch < m && a.chunk >= 0 && a.chunk < v);
        auto& at = a.op == PipeOp::kForward ? fwd_at : bwd_at;
        ASSERT_TRUE(at.emplace(std::make_pair(a.micro_batch, a.chunk), i).second)
            << "twice: " << to_string(a);
      }
      ASSERT_EQ(fwd_at.size(), static_cast<size_t>(v * m));
      ASSERT_EQ(bwd_at.size(), static_cast<size_t>(v * m));
      for (const auto& [key, i] : fwd_at) EXPECT_LT(i, bwd_at.at(key));
    }
  }
}

// Independent reference for the round numbers: with unit-time actions, an action starts one
// round after the later of (its predecessor on the same stage, the producers of its inputs).
// That is the longest path to it in the dependency DAG, computed here by memoized recursion
// over the DAG (no time stepping). Returns start rounds per stage, in schedule order.
std::vector<std::vector<int>> dag_start_rounds(int P, int v, int M) {
  std::vector<std::vector<PipeAction>> sched;
  for (int s = 0; s < P; ++s) sched.push_back(schedule(P, s, v, M));
  const int K = P * v;
  // Where each (op, m, global chunk k) sits: (stage, position).
  std::map<std::tuple<int, int, int>, std::pair<int, int>> where;
  for (int s = 0; s < P; ++s) {
    for (int i = 0; i < static_cast<int>(sched[s].size()); ++i) {
      const PipeAction& a = sched[s][i];
      where[{a.op == PipeOp::kBackward, a.micro_batch, a.chunk * P + s}] = {s, i};
    }
  }
  std::vector<std::vector<int>> start(P);
  for (int s = 0; s < P; ++s) start[s].assign(sched[s].size(), -1);
  std::function<int(int, int)> earliest = [&](int s, int i) -> int {
    if (start[s][i] >= 0) return start[s][i];
    const PipeAction& a = sched[s][i];
    const int k = a.chunk * P + s;
    std::vector<std::pair<int, int>> deps;
    if (i > 0) deps.emplace_back(s, i - 1);
    if (a.op == PipeOp::kForward && k > 0) deps.push_back(where.at({0, a.micro_batch, k - 1}));
    if (a.op == PipeOp::kBackward) {
      deps.push_back(where.at({0, a.micro_batch, k}));
      if (k < K - 1) deps.push_back(where.at({1, a.micro_batch, k + 1}));
    }
    int t = 0;
    for (auto [ds, di] : deps) t = std::max(t, earliest(ds, di) + 1);
    return start[s][i] = t;
  };
  for (int s = 0; s < P; ++s) {
    for (int i = 0; i < static_cast<int>(sched[s].size()); ++i) earliest(s, i);
  }
  return start;
}

TEST(PipelinePlanTest, RoundsEqualDagLongestPathAndClosedForm) {
  for (auto [p, v, m] : layouts()) {
    SCOPED_TRACE(testing::Message() << "P=" << p << " v=" << v << " M=" << m);
    const std::vector<PipelinePlan> plans = all_plans(p, v, m);
    const std::vector<std::vector<int>> dag = dag_start_rounds(p, v, m);
    int dag_total = 0;
    for (int s = 0; s < p; ++s) {
      ASSERT_EQ(plans[s].rounds.size(), plans[0].rounds.size()) << "stage " << s;
      // The plan's computes, in round order, are the schedule, each in the DAG's round.
      const std::vector<PipeAction> acts = schedule(p, s, v, m);
      size_t i = 0;
      for (int r = 0; r < static_cast<int>(plans[s].rounds.size()); ++r) {
        const auto& c = plans[s].rounds[r].compute;
        if (!c) continue;
        ASSERT_LT(i, acts.size());
        EXPECT_EQ(*c, acts[i]) << "stage " << s << " round " << r;
        EXPECT_EQ(r, dag[s][i]) << "stage " << s << " " << to_string(*c);
        ++i;
      }
      EXPECT_EQ(i, acts.size()) << "stage " << s;
      dag_total = std::max(dag_total, dag[s].back() + 1);
    }
    EXPECT_EQ(static_cast<int>(plans[0].rounds.size()), dag_total);
    // Closed form of the lock-step model. 1F1B: the last stage gets F(0) in round P-1 (one
    // round per stage crossed), then alternates F and B with no gap (2M rounds, its backward
    // needs only its own forward); B(M-1) then crosses P-1 stages back to stage 0, one round
    // each: 2M + 2(P-1). Interleaved (measured, chunk-sized rounds): the same 2(P-1) idle
    // rounds around 2Mv busy ones.
    EXPECT_EQ(static_cast<int>(plans[0].rounds.size()), 2 * m * v + 2 * (p - 1));
  }
}

TEST(PipelinePlanTest, OneFOneBKeepsAtMostStagesMinusStageActivations) {
  for (auto [p, v, m] : layouts()) {
    if (v != 1) continue;
    const std::vector<PipelinePlan> plans = all_plans(p, v, m);
    for (int s = 0; s < p; ++s) {
      // Recount from the rounds: forwards done minus backwards done after each round.
      int live = 0, peak = 0;
      for (const PipeRound& r : plans[s].rounds) {
        if (r.compute) live += r.compute->op == PipeOp::kForward ? 1 : -1;
        peak = std::max(peak, live);
      }
      EXPECT_EQ(live, 0);
      EXPECT_EQ(plans[s].max_live_activations, peak) << "P=" << p << " M=" << m << " s=" << s;
      EXPECT_LE(peak, p - s) << "P=" << p << " M=" << m << " s=" << s;
      EXPECT_EQ(peak, std::min(p - s, m)) << "P=" << p << " M=" << m << " s=" << s;
    }
  }
}

TEST(PipelinePlanTest, InterleavingShrinksTheBubbleByTheVirtualStages) {
  for (int p : {2, 4, 8}) {
    for (int v : {2, 4}) {
      for (int m : {p, 2 * p, 4 * p}) {
        SCOPED_TRACE(testing::Message() << "P=" << p << " v=" << v << " M=" << m);
        const std::vector<PipelinePlan> plain = all_plans(p, 1, m);
        const std::vector<PipelinePlan> inter = all_plans(p, v, m);
        for (int s = 0; s < p; ++s) {
          const int idle_plain = static_cast<int>(plain[s].rounds.size()) - busy_rounds(plain[s]);
          const int idle_inter = static_cast<int>(inter[s].rounds.size()) - busy_rounds(inter[s]);
          EXPECT_EQ(busy_rounds(plain[s]), 2 * m);
          EXPECT_EQ(busy_rounds(inter[s]), 2 * m * v);
          EXPECT_EQ(idle_plain, 2 * (p - 1));
          // Interleaved rounds are 1/v as long (one chunk of the stage's layers): idle time in
          // 1F1B rounds is idle_inter / v, v times smaller.
          EXPECT_LT(static_cast<double>(idle_inter) / v, idle_plain) << "stage " << s;
          EXPECT_EQ(idle_inter, 2 * (p - 1)) << "stage " << s;  // as many rounds, 1/v as long
        }
      }
    }
  }
}

TEST(PipelinePlanTest, EverySendMeetsItsRecvInTheSameRoundAndPrecedesItsUse) {
  for (auto [p, v, m] : layouts()) {
    SCOPED_TRACE(testing::Message() << "P=" << p << " v=" << v << " M=" << m);
    const int K = p * v;
    const std::vector<PipelinePlan> plans = all_plans(p, v, m);
    const int rounds = static_cast<int>(plans[0].rounds.size());
    // (is_grad, m, model chunk) -> round it arrived, per receiving stage.
    std::vector<std::map<std::tuple<bool, int, int>, int>> arrived(p);
    int sends = 0, recvs = 0;
    for (int r = 0; r < rounds; ++r) {
      for (int s = 0; s < p; ++s) {
        const PipeRound& round = plans[s].rounds[r];
        std::set<int> recv_peers;
        for (const PipeTransfer& t : round.sends) {
          ++sends;
          // Sent by this round's compute, to the stage of the next/previous chunk.
          ASSERT_TRUE(round.compute.has_value());
          const PipeAction& c = *round.compute;
          EXPECT_EQ(t.is_grad, c.op == PipeOp::kBackward);
          EXPECT_EQ(t.micro_batch, c.micro_batch);
          EXPECT_EQ(t.model_chunk, c.chunk * p + s);
          EXPECT_EQ(t.peer_stage, (t.model_chunk + (t.is_grad ? K - 1 : 1)) % p);
          const auto& peer_recvs = plans[t.peer_stage].rounds[r].recvs;
          const PipeTransfer mirror{t.is_grad, t.micro_batch, t.model_chunk, s};
          EXPECT_EQ(std::count(peer_recvs.begin(), peer_recvs.end(), mirror), 1)
              << "stage " << s << " round " << r;
        }
        // One compute per round: a stage never sends two messages in a round, so two
        // messages between the same pair of stages never share a batch (no matching order).
        EXPECT_LE(round.sends.size(), 1u);
        for (const PipeTransfer& t : round.recvs) {
          ++recvs;
          const auto& peer_sends = plans[t.peer_stage].rounds[r].sends;
          EXPECT_EQ(std::count(peer_sends.begin(), peer_sends.end(),
                               PipeTransfer{t.is_grad, t.micro_batch, t.model_chunk, s}),
                    1);
          EXPECT_TRUE(recv_peers.insert(t.peer_stage).second)
              << "two recvs from stage " << t.peer_stage << " in round " << r;
          EXPECT_TRUE(arrived[s]
                          .emplace(std::make_tuple(t.is_grad, t.micro_batch, t.model_chunk), r)
                          .second);
        }
        // Every input this round's compute needs arrived in an earlier round.
        if (round.compute) {
          const PipeAction& c = *round.compute;
          const int k = c.chunk * p + s;
          const bool needs = c.op == PipeOp::kForward ? k > 0 : k < K - 1;
          if (needs) {
            const bool is_grad = c.op == PipeOp::kBackward;
            const auto it =
                arrived[s].find(std::make_tuple(is_grad, c.micro_batch, is_grad ? k + 1 : k - 1));
            ASSERT_NE(it, arrived[s].end()) << "stage " << s << " " << to_string(c);
            EXPECT_LT(it->second, r);
          }
        }
      }
    }
    EXPECT_EQ(sends, recvs);
    EXPECT_EQ(sends, 2 * m * (K - 1));  // each micro-batch crosses K-1 boundaries both ways
  }
}

TEST(PipelinePlanTest, TwoStagesOneFOneBPlanWrittenOut) {
  // P=2, M=2. Round: stage 0            stage 1
  //   0           F(0) -> act(0,0)      -
  //   1           F(1) -> act(1,0)      F(0)  (act(0,0) arrived in round 0)
  //   2           -  (waits grad)       B(0) -> grad(0,1)
  //   3           B(0)                  F(1)
  //   4           -                     B(1) -> grad(1,1)
  //   5           B(1)                  -
  const PipelinePlan s0 = *plan_pipeline(2, 0, 1, 2);
  const PipelinePlan s1 = *plan_pipeline(2, 1, 1, 2);
  ASSERT_EQ(s0.rounds.size(), 6u);
  ASSERT_EQ(s1.rounds.size(), 6u);
  const std::vector<std::optional<PipeAction>> c0 = {F(0), F(1),         std::nullopt,
                                                     B(0), std::nullopt, B(1)};
  const std::vector<std::optional<PipeAction>> c1 = {std::nullopt, F(0), B(0),
                                                     F(1),         B(1), std::nullopt};
  for (int r = 0; r < 6; ++r) {
    EXPECT_EQ(s0.rounds[r].compute, c0[r]) << r;
    EXPECT_EQ(s1.rounds[r].compute, c1[r]) << r;
  }
  using T = PipeTransfer;
  EXPECT_THAT(s0.rounds[0].sends, ElementsAreArray({T{false, 0, 0, 1}}));
  EXPECT_THAT(s1.rounds[0].recvs, ElementsAreArray({T{false, 0, 0, 0}}));
  EXPECT_THAT(s1.rounds[2].sends, ElementsAreArray({T{true, 0, 1, 0}}));
  EXPECT_THAT(s0.rounds[2].recvs, ElementsAreArray({T{true, 0, 1, 1}}));
  EXPECT_TRUE(s0.rounds[3].sends.empty());  // B on chunk 0 has no one to send to
  EXPECT_EQ(s0.max_live_activations, 2);
  EXPECT_EQ(s1.max_live_activations, 1);
}

TEST(PipelineScheduleTest, BadArgumentsAreErrorsNamingTheNumbers) {
  auto not_divisible = interleaved_schedule(4, 0, 2, 6);
  ASSERT_FALSE(not_divisible.ok());
  EXPECT_EQ(not_divisible.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(not_divisible.status().message(), HasSubstr("6 micro-batches"));
  EXPECT_THAT(not_divisible.status().message(), HasSubstr("4 pipeline stages"));
  EXPECT_FALSE(interleaved_schedule(4, 0, 1, 8).ok());  // v = 1 is 1F1B
  EXPECT_FALSE(interleaved_schedule(1, 0, 2, 4).ok());  // one stage: nothing to interleave
  EXPECT_FALSE(interleaved_schedule(4, 4, 2, 8).ok());  // stage out of range
  EXPECT_FALSE(plan_pipeline(4, 0, 2, 6).ok());
  EXPECT_FALSE(plan_pipeline(4, -1, 1, 6).ok());
  EXPECT_FALSE(plan_pipeline(4, 0, 1, 0).ok());
  EXPECT_FALSE(plan_pipeline(4, 0, 0, 4).ok());
  EXPECT_TRUE(plan_pipeline(1, 0, 1, 3).ok());  // a single stage: F, B, F, B, ...
}

TEST(PipelinePlanTest, SimulationReportsDeadlocksAndBadSchedules) {
  // Stage 1 wants micro-batch 1 first, stage 0 will not send it before B(0) comes back.
  auto dead = simulate_pipeline(2, 1, 2, {{F(0), B(0), F(1), B(1)}, {F(1), B(1), F(0), B(0)}});
  ASSERT_FALSE(dead.ok());
  EXPECT_EQ(dead.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(dead.status().message(), HasSubstr("deadlock"));
  EXPECT_THAT(dead.status().message(), HasSubstr("stage 1 waits at F(1, 0)"));
  // A backward listed before its own forward never becomes ready.
  EXPECT_FALSE(simulate_pipeline(1, 1, 1, {{B(0), F(0)}}).ok());
  // Malformed lists.
  EXPECT_EQ(simulate_pipeline(1, 1, 2, {{F(0), F(0), B(0), B(1)}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(simulate_pipeline(1, 1, 1, {{F(0)}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(simulate_pipeline(1, 1, 1, {{F(0), B(0, 1)}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(simulate_pipeline(2, 1, 1, {{F(0), B(0)}}).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A custom valid order (GPipe: all forwards, then all backwards) plans fine.
  auto gpipe = simulate_pipeline(2, 1, 2, {{F(0), F(1), B(0), B(1)}, {F(0), F(1), B(0), B(1)}});
  ASSERT_TRUE(gpipe.ok()) << gpipe.status();
  EXPECT_EQ((*gpipe)[1].max_live_activations, 2);
}

}  // namespace
}  // namespace anvil::parallel
