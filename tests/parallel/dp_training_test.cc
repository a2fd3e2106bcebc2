// Data parallelism end to end on the CPU: a tiny GPT trained for 3 steps with dp = world size
// (1, 2 or 4 ranks under mpirun), ZeRO stage 0 and 1, gives the losses, gradient norms and final
// parameters of the single-rank run with the same global batch and micro-batch size. Every rank
// also trains the single-rank reference itself (no communication), then compares.
// With dropout on: DP rank r's micro-batch m holds the samples of the single-rank micro-batch
// m * dp + r and uses its dropout offset, so even the masks agree.
//
// Tolerances. f64 (the CPU model runs in double too): the logic must be exact up to summation
// order: losses and norms relative 1e-12, parameters 1e-12 absolute. f32: the gradient sums over
// ranks and micro-batches run in another order, a few ulps apart; AdamW turns each element's
// gradient into an update of about lr * m / sqrt(v), so where a gradient is itself near rounding
// noise (cancellation) its update can differ by a small fraction of lr (1e-2 here). Losses and
// norms: relative 1e-5; parameters: |dp - ref| <= 1e-4 = lr / 100 (observed max 3e-5 on 4 ranks).
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "model/stack_train/gpt_train_model.h"
#include "model/train/trainer.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/tiny_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

TrainConfig tiny_config() { return testing_parallel::tiny_train_config(); }

SampleFn samples(int64_t seq_len, int64_t vocab) {
  return testing_parallel::hashed_samples(seq_len, vocab);
}

Precision cpu(engine::DType dt) { return Precision{engine::Device::kCpu, dt, dt}; }

// Every parameter's values in table order, without the flat layout's padding (ZeRO pads its
// buckets to a multiple of dp * 64, so flat offsets differ between layouts).
std::vector<double> param_values(GptModel& m) {
  const std::vector<double> flat = testing::to_host_f64(m.flat_buffers().value);
  std::vector<double> out;
  for (const Param& p : m.params().all()) {
    out.insert(out.end(), flat.begin() + p.offset, flat.begin() + p.offset + p.numel());
  }
  return out;
}

struct RunResult {
  std::vector<double> losses, norms;
  std::vector<double> params;
};

RunResult train(const TrainConfig& cfg, engine::DType dt, const TrainerParallel& par) {
  RunResult r;
  auto t = Trainer::create(cfg, cpu(dt), samples(cfg.data.seq_len, cfg.model.vocab_size), {},
                           engine::LogContext{}, par);
  ANVIL_CHECK_OK(t.status());
  for (int i = 0; i < cfg.train.steps; ++i) {
    const StepStats st = (*t)->step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  r.params = param_values(gpt_model((*t)->model()));
  return r;
}

// (ZeRO stage, dtype)
class DpTrainingTest : public ::testing::TestWithParam<std::tuple<int, engine::DType>> {};

TEST_P(DpTrainingTest, EqualsOneRankWithTheSameGlobalBatch) {
  const int zero_stage = std::get<0>(GetParam());
  const engine::DType dt = std::get<1>(GetParam());
  const bool f64 = dt == engine::DType::kF64;
  const double rel = f64 ? 1e-12 : 1e-5, atol = f64 ? 1e-12 : 1e-4;
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);

  TrainConfig ref_cfg = tiny_config();
  const RunResult ref = train(ref_cfg, dt, TrainerParallel{});

  auto grid = parallel::ProcessGrid::create(world, rank, 1, 1);
  ASSERT_TRUE(grid.ok());
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*grid, opt);
  ASSERT_TRUE(comms.ok()) << comms.status();
  TrainConfig cfg = tiny_config();
  cfg.parallel.dp = world;
  cfg.parallel.zero_stage = zero_stage;
  cfg.parallel.reduce_single_rank = true;  // one rank too: through MpiComm
  cfg.parallel.bucket_mb = 0.01;           // 2621 elements: many buckets
  TrainerParallel par;
  par.grid = &*grid;
  par.comms = &*comms;
  const RunResult dp = train(cfg, dt, par);

  ASSERT_EQ(dp.losses.size(), ref.losses.size());
  for (size_t i = 0; i < ref.losses.size(); ++i) {
    EXPECT_NEAR(dp.losses[i], ref.losses[i], rel * std::abs(ref.losses[i])) << "step " << i;
    EXPECT_NEAR(dp.norms[i], ref.norms[i], rel * ref.norms[i]) << "step " << i;
  }
  ASSERT_EQ(dp.params.size(), ref.params.size());
  double max_diff = 0.0;
  int64_t bad = 0;
  for (size_t i = 0; i < ref.params.size(); ++i) {
    const double d = std::abs(dp.params[i] - ref.params[i]);
    max_diff = std::max(max_diff, d);
    if (d > atol) ++bad;
  }
  EXPECT_EQ(bad, 0) << "max |dp - ref| = " << max_diff;
  // The parameters moved: the comparison is not between two untouched inits.
  const RunResult init_only = [&] {
    TrainConfig c = tiny_config();
    c.train.steps = 0;
    return train(c, dt, TrainerParallel{});
  }();
  double moved = 0.0;
  for (size_t i = 0; i < ref.params.size(); ++i) {
    moved = std::max(moved, std::abs(ref.params[i] - init_only.params[i]));
  }
  EXPECT_GT(moved, 1e-3);
  if (rank == 0) {
    std::printf("%s dp %d zero %d: losses %.6f %.6f %.6f, max |dp - ref| param %.3g\n",
                f64 ? "f64" : "f32", world, zero_stage, dp.losses[0], dp.losses[1], dp.losses[2],
                max_diff);
  }
}

// On the GPU (the H200 run, one rank): the DP machinery through NcclComm over a single rank
// (reduce_single_rank: bucketed all-reduce on the comm stream with events, scalar sums, and
// ZeRO-1's reduce-scatter / sharded AdamW / all-gather) must train like the run without any
// reduction. Not bit-identical: the CUDA embedding backward scatters with atomicAdd, so two runs
// differ in the last bits of the embedding gradients, which AdamW can amplify to a fraction of
// lr for elements with near-zero gradients. The first loss (before any update) must be equal;
// later losses and norms within 1e-3 relative; parameters within 3 lr, 1e-4 on average.
TEST(DpTrainingGpuTest, NcclSingleRankEqualsNoReduction) {
  ANVIL_SKIP_WITHOUT_GPU();
  int world = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world > 1) GTEST_SKIP() << "single-rank GPU test";
  const Precision gpu{engine::Device::kCuda, engine::DType::kBF16, engine::DType::kF32};
  auto run = [&](bool reduce, int zero_stage) {
    TrainConfig cfg = tiny_config();
    cfg.parallel.reduce_single_rank = reduce;
    cfg.parallel.zero_stage = zero_stage;
    cfg.parallel.bucket_mb = 0.01;
    cfg.parallel.timeout_s = 60;
    RunResult r;
    auto t = Trainer::create(cfg, gpu, samples(cfg.data.seq_len, cfg.model.vocab_size), {},
                             engine::LogContext{}, TrainerParallel{});
    ANVIL_CHECK_OK(t.status());
    for (int i = 0; i < cfg.train.steps; ++i) {
      const StepStats st = (*t)->step();
      r.losses.push_back(st.loss);
      r.norms.push_back(st.grad_norm);
    }
    (*t)->stream().synchronize();
    r.params = param_values(gpt_model((*t)->model()));
    return r;
  };
  const RunResult plain = run(false, 0);
  for (double l : plain.losses) ASSERT_TRUE(std::isfinite(l));
  for (int zero_stage : {0, 1}) {
    const RunResult nccl = run(true, zero_stage);
    SCOPED_TRACE(zero_stage);
    ASSERT_EQ(nccl.losses.size(), plain.losses.size());
    EXPECT_EQ(nccl.losses[0], plain.losses[0]);
    for (size_t i = 0; i < plain.losses.size(); ++i) {
      EXPECT_NEAR(nccl.losses[i], plain.losses[i], 1e-3 * plain.losses[i]) << i;
      EXPECT_NEAR(nccl.norms[i], plain.norms[i], 1e-3 * plain.norms[i]) << i;
    }
    ASSERT_EQ(nccl.params.size(), plain.params.size());
    double max_diff = 0.0, sum_diff = 0.0;
    for (size_t i = 0; i < plain.params.size(); ++i) {
      const double d = std::abs(nccl.params[i] - plain.params[i]);
      max_diff = std::max(max_diff, d);
      sum_diff += d;
    }
    EXPECT_LE(max_diff, 3e-2);
    EXPECT_LE(sum_diff / static_cast<double>(plain.params.size()), 1e-4);
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, DpTrainingTest,
                         ::testing::Combine(::testing::Values(0, 1),
                                            ::testing::Values(engine::DType::kF32,
                                                              engine::DType::kF64)),
                         [](const ::testing::TestParamInfo<std::tuple<int, engine::DType>>& i) {
                           return "zero" + std::to_string(std::get<0>(i.param)) +
                                  (std::get<1>(i.param) == engine::DType::kF64 ? "_f64" : "_f32");
                         });

}  // namespace
}  // namespace anvil::model
