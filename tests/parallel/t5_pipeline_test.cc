// T5 pipeline parallelism on the CPU under mpirun (np 1, 2, 4, 8), in double: every rank also
// builds the single-rank reference (no communication) from the same seed and runs the same
// global batch on it, micro-batch after micro-batch.
//  - PP2 (encoder on stage 0, decoder on stage 1; v1.0 tied and v1.1 untied, dropout on: the
//    masks are numbered by global layer and micro-batch, so they equal the reference's),
//    PP4 with split 2 (2 encoder + 2 decoder layers: one per stage), PP4 with split 1 (3 + 3
//    layers: the encoder output crosses three decoder stages), TP2 x PP2
//    (dropout off: the FFN-hidden masks are per TP slice) and TP2 x PP2 x DP2: 3 micro-batches
//    per DP rank through the runner's 1F1B plan (model/train/pipeline_runner.h, T5PipelineStage),
//    the shared parameters' copies summed over the stages (T5Model::sum_shared_grads), the
//    gradients over DP; over 3 AdamW steps the loss (from the last stage), the gradient norm
//    (over all stages, shared parameters once), every parameter's gradient and the updated
//    parameters equal the reference's to 1e-10 relative (f64; only summation orders differ)
//    where each stack lies on one stage. Where a stack spans several stages (PP4), each stage
//    rounds its part of a relative table's gradient to f32 (the attention op accumulates the
//    bias gradient in f32, t5_impl.h drel_f32) before the f64 sum over the stages, where one
//    rank rounds the whole sum once: those gradients differ by ~1e-7 relative, and the
//    parameters they update after that; there the tolerance is 1e-5 relative.
//  - Sequence parallelism (TP2, TP2 x PP2, TP2 x PP2 x DP2; stage transfers of this TP rank's
//    rows, RMSNorm gradients summed by T5Model::finish_backward) and full recomputation (PP2
//    with dropout on; with sequence parallelism under TP2 x PP2 x DP2) give the same.
//  - Evaluation through run_pipeline_forward gives the reference's loss.
//  - Initial parameters of every stage (shared copies included) equal the reference's.
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "model/t5/t5_stage.h"
#include "model/train/pipeline_runner.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/mpi_comm.h"
#include "parallel/pipeline_schedule.h"
#include "tests/parallel/t5_testing.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;
using engine::TensorView;

constexpr int64_t kMicro = 3;  // micro-batches per DP rank and step

using testing_t5::Batch;
using testing_t5::World;

T5Config tiny_config(T5Version v, float dropout, int64_t layers) {
  return testing_t5::tiny_config(v, dropout, layers, layers);
}

constexpr T5RunShape kShape{2, 7, 5};

Batch make_batch(uint64_t seed) {
  return testing_t5::make_batch(kShape, seed, {7, static_cast<int32_t>(3 + seed % 4)});
}

struct Layout {
  int tp = 1, pp = 1, dp = 1, split = 1;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
};

World make_world(const Layout& l) { return testing_t5::make_world(l.tp, l.pp, l.dp); }

const Precision kF64{engine::Device::kCpu, DType::kF64, DType::kF64};

double world_sum(double v) {
  MPI_Allreduce(MPI_IN_PLACE, &v, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  return v;
}

// Every local parameter of `m` against the reference at the same global elements.
void expect_params_equal(T5Model& m, T5Model& ref, int tp, int tp_rank, TensorView Param::*field,
                         double rtol, const std::string& what) {
  for (const Param& p : m.params().all()) {
    const Param* r = ref.params().find(p.name);
    ASSERT_NE(r, nullptr) << p.name;
    const std::vector<double> whole = testing::to_host_f64(r->*field);
    std::vector<double> expected;
    for (int64_t i = 0; i < p.numel(); ++i) {
      expected.push_back(whole[static_cast<size_t>(tp_global_index(p, i, tp, tp_rank))]);
    }
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(p.*field), expected,
                                      {rtol, 10 * rtol, rtol * rtol}, true))
        << what << " " << p.name;
  }
}

// The single-rank step over all global micro-batches; returns the step loss.
double reference_step(T5Model& ref, const std::vector<Batch>& batches, uint64_t first,
                      engine::Stream& s) {
  ref.zero_grads(s);
  double loss = 0.0;
  const double total = static_cast<double>(batches.size());
  for (size_t g = 0; g < batches.size(); ++g) {
    const double scale = 1.0 / (total * static_cast<double>(batches[g].counted));
    ref.forward(batches[g].view(), true, first + g, s);
    loss += ref.loss_sum(s) * scale;
    ref.backward(static_cast<float>(scale), s);
  }
  return loss;
}

// rtol: the relative tolerance of losses, norms, gradients and parameters (see the top).
void check_pipeline(const Layout& l, T5Version v, float dropout, int64_t layers,
                    double rtol = 1e-10) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != l.tp * l.pp * l.dp) GTEST_SKIP() << "needs " << l.tp * l.pp * l.dp << " ranks";
  World w = make_world(l);
  const parallel::ProcessGrid& g = *w.grid;
  engine::Stream s = engine::Stream::cpu();
  const T5Config cfg = tiny_config(v, dropout, layers);
  auto plan = parallel::plan_pipeline(l.pp, g.pp_rank(), 1, kMicro);
  ASSERT_TRUE(plan.ok()) << plan.status();
  T5Shard shard;
  shard.tp = l.tp;
  shard.tp_rank = g.tp_rank();
  shard.tp_comm = w.comms->tp.get();
  shard.pp = l.pp;
  shard.pp_rank = g.pp_rank();
  shard.pp_split = l.split;
  shard.act_slots = pipeline_slots(*plan, l.pp, g.pp_rank());
  shard.sequence_parallel = l.sequence_parallel;
  shard.recompute = l.recompute;
  auto ref = T5Model::create(cfg, kShape, kF64, 5);
  auto pp = T5Model::create(cfg, kShape, kF64, 5, shard);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(pp.ok()) << pp.status();
  expect_params_equal(**pp, **ref, l.tp, g.tp_rank(), &Param::value, 1e-12, "initial");
  const bool counts = g.tp_rank() == 0 && g.dp_rank() == 0;  // one rank per pipeline stage
  for (int k = 0; k < 3; ++k) {
    // The global batch: micro-batch m of DP rank r is global micro-batch m * dp + r.
    std::vector<Batch> batches;
    for (int64_t m = 0; m < kMicro * l.dp; ++m) {
      batches.push_back(make_batch(static_cast<uint64_t>(100 * k + 7 * m)));
    }
    const uint64_t first = static_cast<uint64_t>(k * kMicro * l.dp);
    const double loss_ref = reference_step(**ref, batches, first, s);
    auto global = [&](int64_t m) { return static_cast<size_t>(m * l.dp + g.dp_rank()); };
    auto scale = [&](int64_t m) {
      return 1.0 / (static_cast<double>(batches.size()) *
                    static_cast<double>(batches[global(m)].counted));
    };
    PipelineStepFns fns;
    fns.grad_scale = [&](int64_t m) { return static_cast<float>(scale(m)); };
    fns.dropout_offset = [&](int64_t m) { return first + global(m); };
    T5PipelineStage stage(**pp, shard.act_slots,
                          [&](int64_t m) { return batches[global(m)].view(); });
    (*pp)->zero_grads(s);
    const std::vector<double> losses = run_pipeline_step(
        stage, *plan, l.pp, g.pp_rank(), l.pp > 1 ? w.comms->pp.get() : nullptr, fns, s);
    double loss = 0.0;
    for (int64_t m = 0; m < kMicro; ++m) loss += losses[static_cast<size_t>(m)] * scale(m);
    (*pp)->finish_backward(s);
    (*pp)->sum_shared_grads(l.pp > 1 ? w.comms->pp.get() : nullptr, s);
    if (l.dp > 1) w.comms->dp->all_reduce((*pp)->flat_buffers().grad, parallel::ReduceOp::kSum, s);
    // Losses of the last stage (zeros elsewhere) over the DP ranks; norms over the stages.
    loss = world_sum(g.tp_rank() == 0 ? loss : 0.0);
    EXPECT_NEAR(loss, loss_ref, rtol * loss_ref) << "step " << k;
    const double ss = (*pp)->grad_sum_squares(s);
    const double norm = std::sqrt(world_sum(counts ? ss : 0.0)), norm_ref = (*ref)->grad_norm(s);
    EXPECT_GT(norm_ref, 0.0);
    EXPECT_NEAR(norm, norm_ref, rtol * norm_ref) << "step " << k;
    expect_params_equal(**pp, **ref, l.tp, g.tp_rank(), &Param::grad, rtol,
                        "grad of step " + std::to_string(k));
    const OptimizerStep o{1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, 1.0f, k + 1};
    (*ref)->optimizer_step(o, s);
    (*pp)->optimizer_step(o, s);
  }
  expect_params_equal(**pp, **ref, l.tp, g.tp_rank(), &Param::value, rtol, "after 3 steps");
  // Evaluation: one micro-batch forward through the stages.
  const Batch e = make_batch(999);
  (*ref)->forward(e.view(), false, 0, s);
  const double eval_ref = (*ref)->loss_sum(s);
  T5PipelineStage stage(**pp, shard.act_slots, [&](int64_t) { return e.view(); });
  const double eval =
      run_pipeline_forward(stage, l.pp, g.pp_rank(), l.pp > 1 ? w.comms->pp.get() : nullptr, s);
  EXPECT_NEAR(world_sum(counts ? eval : 0.0), eval_ref, rtol * eval_ref);
}

TEST(T5Pipeline, Pp2V10TiedEqualsSingleRank) {
  check_pipeline({1, 2, 1, 1}, T5Version::kV1_0, 0.1f, 2);
}
TEST(T5Pipeline, Pp2V11UntiedEqualsSingleRank) {
  check_pipeline({1, 2, 1, 1}, T5Version::kV1_1, 0.1f, 2);
}
TEST(T5Pipeline, Pp4Split2EqualsSingleRank) {
  check_pipeline({1, 4, 1, 2}, T5Version::kV1_0, 0.1f, 2, 1e-5);
}
TEST(T5Pipeline, Pp4Split1V11EqualsSingleRank) {
  // One encoder stage, three decoder stages: the encoder output crosses two decoder stages.
  check_pipeline({1, 4, 1, 1}, T5Version::kV1_1, 0.1f, 3, 1e-5);
}
TEST(T5Pipeline, Tp2Pp2EqualsSingleRank) {
  check_pipeline({2, 2, 1, 1}, T5Version::kV1_1, 0.0f, 2);
}
TEST(T5Pipeline, Tp2Pp2Dp2EqualsSingleRank) {
  check_pipeline({2, 2, 2, 1}, T5Version::kV1_0, 0.0f, 2);
}
TEST(T5Pipeline, Tp2SequenceParallelEqualsSingleRank) {
  check_pipeline({2, 1, 1, 0, true}, T5Version::kV1_1, 0.0f, 2);
}
TEST(T5Pipeline, Tp2Pp2SequenceParallelEqualsSingleRank) {
  check_pipeline({2, 2, 1, 1, true}, T5Version::kV1_0, 0.0f, 2);
}
TEST(T5Pipeline, Pp2RecomputeFullEqualsSingleRank) {
  check_pipeline({1, 2, 1, 1, false, Recompute::kFull}, T5Version::kV1_1, 0.1f, 2);
}
TEST(T5Pipeline, Tp2Pp2Dp2SequenceParallelRecomputeEqualsSingleRank) {
  check_pipeline({2, 2, 2, 1, true, Recompute::kFull}, T5Version::kV1_1, 0.0f, 2);
}

}  // namespace
}  // namespace anvil::model
