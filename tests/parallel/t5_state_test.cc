// T5 training state across ranks on the CPU under mpirun (np 1, 2, 4), through model::T5Trainer:
//  - ZeRO: dp = world with zero_stage 0 and 1 trains to the single-rank run's losses, gradient
//    norms and parameters (every rank also trains the single-rank reference itself, in f64:
//    the logic must be exact up to summation order, relative 1e-12 for losses and norms,
//    1e-12 absolute for parameters); with zero 1 the AdamW moments are a 1/dp shard.
//  - Checkpoints: under tp = world, dp = world with ZeRO 1 and (4 ranks) tp 2 x dp 2 with
//    ZeRO 1, a run saved at step 3 by every rank (bin/train's three phases with barriers) and
//    resumed by fresh trainers gives bitwise the losses of steps 4-6 of the uninterrupted run
//    (f32; dropout on without TP, off with it: its FFN-hidden masks differ from one rank's). The
//    same checkpoint loaded by a single-rank trainer continues to those losses within 1e-5 relative
//    (f32 sums over TP / DP run in another order than on one rank).
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/checkpoint.h"
#include "model/t5_checkpoint.h"
#include "model/t5_train.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/io/io_test_util.h"
#include "tests/parallel/tiny_t5_training.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using testing_parallel::hashed_t5_samples;
using testing_parallel::tiny_t5_train_config;

GptPrecision cpu(engine::DType dt) { return GptPrecision{engine::Device::kCpu, dt, dt}; }

// The MPI world as a (tp, 1, dp) grid with its CPU communicators.
struct Launch {
  int world = 1, rank = 0;
  std::unique_ptr<parallel::ProcessGrid> grid;
  std::unique_ptr<parallel::GroupComms> comms;
  TrainerParallel par() const { return TrainerParallel{grid.get(), comms.get(), nullptr, 0}; }
};

std::unique_ptr<Launch> launch(int tp, int dp) {
  auto l = std::make_unique<Launch>();
  MPI_Comm_size(MPI_COMM_WORLD, &l->world);
  MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
  auto grid = parallel::ProcessGrid::create(l->world, l->rank, tp, 1, dp);
  ANVIL_CHECK_OK(grid.status());
  l->grid = std::make_unique<parallel::ProcessGrid>(*grid);
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*l->grid, opt);
  ANVIL_CHECK_OK(comms.status());
  l->comms = std::make_unique<parallel::GroupComms>(std::move(*comms));
  return l;
}

int world_size() {
  int w = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &w);
  return w;
}

std::unique_ptr<T5Trainer> make_trainer(const TrainConfig& cfg, engine::DType dt,
                                        const TrainerParallel& par) {
  auto t = T5Trainer::create(
      cfg, cpu(dt),
      hashed_t5_samples(cfg.data.seq_len, cfg.data.decoder_seq_len, cfg.t5.vocab_size), {},
      engine::LogContext{}, par);
  ANVIL_CHECK_OK(t.status());
  return std::move(*t);
}

// Every parameter's values in table order, without padding (ZeRO pads its buckets).
std::vector<double> param_values(T5Model& m) {
  const std::vector<double> flat = testing::to_host_f64(m.flat_buffers().value);
  std::vector<double> out;
  for (const Param& p : m.params().all()) {
    out.insert(out.end(), flat.begin() + p.offset, flat.begin() + p.offset + p.numel());
  }
  return out;
}

class T5ZeroTest : public ::testing::TestWithParam<int> {};

TEST_P(T5ZeroTest, EqualsOneRankWithTheSameGlobalBatch) {
  const int zero_stage = GetParam();
  const TrainConfig ref_cfg = tiny_t5_train_config(3);
  std::unique_ptr<T5Trainer> ref = make_trainer(ref_cfg, engine::DType::kF64, {});
  const int world = world_size();
  std::unique_ptr<Launch> l = launch(1, world);
  TrainConfig cfg = ref_cfg;
  cfg.parallel.dp = world;
  cfg.parallel.zero_stage = zero_stage;
  std::unique_ptr<T5Trainer> dp = make_trainer(cfg, engine::DType::kF64, l->par());
  if (zero_stage > 0 && world > 1) {
    const int64_t n = dp->model().params().flat_numel();
    EXPECT_EQ(dp->model().flat_buffers().m.numel(), n / world);  // the moments are a shard
  }
  for (int i = 0; i < 3; ++i) {
    const StepStats r = ref->step(), d = dp->step();
    EXPECT_NEAR(d.loss, r.loss, 1e-12 * r.loss) << "step " << i + 1;
    EXPECT_NEAR(d.grad_norm, r.grad_norm, 1e-12 * r.grad_norm) << "step " << i + 1;
  }
  const std::vector<double> want = param_values(ref->model()), got = param_values(dp->model());
  ASSERT_EQ(got.size(), want.size());
  double max_diff = 0.0;
  for (size_t i = 0; i < want.size(); ++i)
    max_diff = std::max(max_diff, std::abs(got[i] - want[i]));
  EXPECT_LE(max_diff, 1e-12);
  // The parameters moved (not two untouched initializations).
  TrainConfig still = ref_cfg;
  still.train.steps = 0;
  const std::vector<double> init =
      param_values(make_trainer(still, engine::DType::kF64, {})->model());
  double moved = 0.0;
  for (size_t i = 0; i < want.size(); ++i) moved = std::max(moved, std::abs(want[i] - init[i]));
  EXPECT_GT(moved, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Stages, T5ZeroTest, ::testing::Values(0, 1));

// Rank 0's scratch directory, its path the same on every rank.
std::string shared_dir(std::unique_ptr<io::testing::ScratchDir>& owned, int rank) {
  std::array<char, 512> path{};
  if (rank == 0) {
    owned = std::make_unique<io::testing::ScratchDir>();
    std::snprintf(path.data(), path.size(), "%s", owned->path().c_str());
  }
  MPI_Bcast(path.data(), static_cast<int>(path.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  return path.data();
}

// bin/train's save on every rank: rank 0 begins, each rank writes its boxes, rank 0 finishes.
absl::Status save_all(T5Trainer& t, const TrainConfig& cfg, const Launch& l,
                      const std::string& dir) {
  const int64_t step = t.steps_done();
  if (l.rank == 0) ANVIL_RETURN_IF_ERROR(io::begin_checkpoint(dir, step, "test"));
  MPI_Barrier(MPI_COMM_WORLD);
  const std::string tmp = io::checkpoint_tmp_dir(dir, step, "test");
  ANVIL_RETURN_IF_ERROR(io::write_checkpoint_shard(
      tmp, l.rank, t5_checkpoint_slices(t.model(), l.grid->dp_rank(), t.stream())));
  MPI_Barrier(MPI_COMM_WORLD);
  if (l.rank == 0) {
    io::CheckpointInfo info;
    info.step = step;
    info.model = checkpoint_model_record(cfg);
    info.state = checkpoint_counters(t.state(), cfg);
    info.layout = checkpoint_layout(cfg);
    info.lr_schedule = checkpoint_lr_schedule(cfg, t.state());
    ANVIL_RETURN_IF_ERROR(io::finish_checkpoint(dir, tmp, l.world, info, 0));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return absl::OkStatus();
}

absl::Status load(T5Trainer& t, const TrainConfig& cfg, const std::string& dir) {
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c, io::open_newest_complete(dir, -1, [](const auto&) {}));
  ANVIL_RETURN_IF_ERROR(check_checkpoint_model(c.info().model, cfg, c.dir()));
  ANVIL_RETURN_IF_ERROR(t5_load_checkpoint(
      t.model(), [&](const std::string& name) { return c.read(name); }, false, t.stream()));
  ANVIL_ASSIGN_OR_RETURN(TrainerState s, trainer_state_from(c.info().state, cfg));
  t.restore(s);
  return absl::OkStatus();
}

std::vector<double> run_steps(T5Trainer& t, int n) {
  std::vector<double> losses;
  for (int i = 0; i < n; ++i) losses.push_back(t.step().loss);
  return losses;
}

// The layouts: TP over the world; DP over the world with ZeRO 1; on 4 ranks TP 2 x DP 2 with
// ZeRO 1 (each TP rank's ZeRO pieces of its shard).
enum class Layout { kTp, kDpZero1, kTp2Dp2Zero1 };

class T5ResumeTest : public ::testing::TestWithParam<Layout> {};

TEST_P(T5ResumeTest, ContinuesBitwiseAndLoadsOnOneRank) {
  const int world = world_size();
  int tp = 1;
  switch (GetParam()) {
    case Layout::kTp:
      if (4 % world != 0) GTEST_SKIP() << "4 heads do not split over " << world;
      tp = world;
      break;
    case Layout::kDpZero1:
      break;
    case Layout::kTp2Dp2Zero1:
      if (world != 4) GTEST_SKIP() << "needs 4 ranks";
      tp = 2;
      break;
  }
  std::unique_ptr<Launch> l = launch(tp, world / tp);
  TrainConfig cfg = tiny_t5_train_config(6);
  cfg.parallel.tp = tp;
  cfg.parallel.dp = world / tp;
  cfg.parallel.zero_stage = GetParam() == Layout::kTp ? 0 : 1;
  // Under TP the FFN-hidden dropout masks are not one rank's (model/t5.h): no dropout there, so
  // that the single-rank continuation below follows the same function.
  if (tp > 1) cfg.t5.dropout = 0.0f;
  const engine::DType f32 = engine::DType::kF32;
  const std::vector<double> want = run_steps(*make_trainer(cfg, f32, l->par()), 6);

  std::unique_ptr<io::testing::ScratchDir> owned;
  const std::string dir = shared_dir(owned, l->rank);
  {
    std::unique_ptr<T5Trainer> first = make_trainer(cfg, f32, l->par());
    run_steps(*first, 3);
    const absl::Status saved = save_all(*first, cfg, *l, dir);
    ASSERT_TRUE(saved.ok()) << saved;
  }
  std::unique_ptr<T5Trainer> second = make_trainer(cfg, f32, l->par());
  const absl::Status loaded = load(*second, cfg, dir);
  ASSERT_TRUE(loaded.ok()) << loaded;
  EXPECT_EQ(second->steps_done(), 3);
  const std::vector<double> got = run_steps(*second, 3);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(got[i], want[3 + i]) << "step " << 4 + i;

  // Another layout: one rank (no TP, DP or ZeRO) from the same files.
  TrainConfig one = cfg;
  one.parallel = ParallelConfig{};
  std::unique_ptr<T5Trainer> single = make_trainer(one, f32, {});
  const absl::Status resharded = load(*single, one, dir);
  ASSERT_TRUE(resharded.ok()) << resharded;
  const std::vector<double> alone = run_steps(*single, 3);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_NEAR(alone[i], want[3 + i], 1e-5 * want[3 + i]) << "step " << 4 + i;
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every rank has read before rank 0 removes the directory
}

std::string layout_name(const ::testing::TestParamInfo<Layout>& info) {
  switch (info.param) {
    case Layout::kTp:
      return "Tp";
    case Layout::kDpZero1:
      return "DpZero1";
    case Layout::kTp2Dp2Zero1:
      return "Tp2Dp2Zero1";
  }
  return "";
}

INSTANTIATE_TEST_SUITE_P(Layouts, T5ResumeTest,
                         ::testing::Values(Layout::kTp, Layout::kDpZero1, Layout::kTp2Dp2Zero1),
                         layout_name);

}  // namespace
}  // namespace anvil::model
