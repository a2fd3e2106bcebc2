// The toy model family registered from tests/ (tests/model/toy_family.h, issue 22 item 7)
// trained through the shared trainer under mpirun: every (tp, dp) layout of the world size
// (1: the grid's single rank; 2: tp2, dp2; 4: tp2 x dp2, tp4, dp4) against the single-rank
// trainer on the same global batches, 4 steps with weight decay and gradient clipping on. Each
// rank trains the single-rank reference itself (no communication), then the layout; losses,
// gradient norms and the final parameters (each rank's shards, by tp_global_index) must agree.
// The TP mappings (the MLP's partial output and partial input gradient summed over TP), the
// gradient norm's count of TP replicas and the DP gradient sum (parallel/grad_sync.h) each
// change the numbers when broken.
//
// Tolerances. f64: exact up to summation order (TP splits the MLP's sums over hidden units, DP
// the gradient's over micro-batches): losses and norms relative 1e-13, parameters 1e-14
// absolute (observed: 3e-16 and 1e-16). f32: the same reorderings a few ulps apart, carried
// through 4 AdamW steps: losses and norms relative 1e-6, parameters 1e-6 absolute (observed:
// 5e-8 and 3e-8, parameters of size 0.1 moved by lr 1e-2 per step).
#include <mpi.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "model/param_table.h"
#include "model/train/trainer.h"
#include "tests/model/toy_family.h"
#include "tests/parallel/world_comm.h"

namespace anvil::model {
namespace {

using engine::DType;

struct Layout {
  int tp, dp;
  std::string name() const { return absl::StrFormat("tp%d dp%d", tp, dp); }
};

std::vector<Layout> layouts(int world) {
  const std::vector<Layout> all = {{1, 1}, {2, 1}, {1, 2}, {2, 2}, {4, 1}, {1, 4}};
  std::vector<Layout> out;
  for (const Layout& l : all) {
    if (l.tp * l.dp == world) out.push_back(l);
  }
  return out;
}

// 4 steps of 4 micro-batches of 4 samples (dp4: one per rank), AdamW with weight decay, the
// global norm clipped (active: the norm is about 1).
TrainConfig config() {
  TrainConfig cfg = toy::toy_config(4);
  cfg.train.micro_batch = 4;
  cfg.train.global_batch = 16;
  cfg.optim.weight_decay = 0.1;
  cfg.optim.clip_grad = 0.1;
  return cfg;
}

struct ToyRun {
  std::unique_ptr<Trainer> trainer;
  std::vector<double> losses, norms;
};

ToyRun train(const TrainConfig& cfg, DType dt, const TrainerParallel& par) {
  ToyRun r;
  auto t = Trainer::create(cfg, Precision{engine::Device::kCpu, dt, dt},
                           toy::toy_samples(cfg.data.seq_len), {}, engine::LogContext{}, par);
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return r;
  r.trainer = std::move(*t);
  for (int64_t i = 0; i < cfg.train.steps; ++i) {
    const StepStats st = r.trainer->step();
    r.losses.push_back(st.loss);
    r.norms.push_back(st.grad_norm);
  }
  return r;
}

class ToyFamilyParallelTest : public ::testing::TestWithParam<DType> {};

TEST_P(ToyFamilyParallelTest, EveryLayoutEqualsOneRank) {
  const DType dt = GetParam();
  const bool f64 = dt == DType::kF64;
  const double rel = f64 ? 1e-13 : 1e-6, atol = f64 ? 1e-14 : 1e-6;
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<Layout> ls = layouts(world);
  if (ls.empty()) GTEST_SKIP() << "no toy layout of " << world << " ranks";
  for (const Layout& l : ls) {
    SCOPED_TRACE(l.name());
    TrainConfig cfg = config();
    ToyRun ref = train(cfg, dt, TrainerParallel{});
    cfg.parallel.tp = l.tp;
    cfg.parallel.dp = l.dp;
    cfg.parallel.timeout_s = 120;
    auto lc = parallel::testing::layout_comms(l.tp, 1, l.dp);
    ASSERT_TRUE(lc.ok()) << lc.status();
    TrainerParallel par;
    par.grid = &(*lc)->grid;
    par.comms = &(*lc)->comms;
    par.local_rank = rank;
    ToyRun run = train(cfg, dt, par);
    ASSERT_TRUE(ref.trainer && run.trainer);
    for (size_t i = 0; i < ref.losses.size(); ++i) {
      EXPECT_GT(ref.norms[i], cfg.optim.clip_grad) << "step " << i << ": clipping is off";
      EXPECT_NEAR(run.losses[i], ref.losses[i], rel * ref.losses[i]) << "step " << i;
      EXPECT_NEAR(run.norms[i], ref.norms[i], rel * ref.norms[i]) << "step " << i;
    }
    EXPECT_LT(ref.losses.back(), ref.losses.front()) << "the toy does not learn";
    // Each of this rank's parameter elements against the single-rank parameter's element.
    ParamTable &mine = run.trainer->model().params(), &one = ref.trainer->model().params();
    ASSERT_EQ(mine.all().size(), one.all().size());
    for (const Param& p : mine.all()) {
      const Param* q = one.find(p.name);
      ASSERT_NE(q, nullptr) << p.name;
      ASSERT_EQ(p.numel() * (p.tp_split_dim < 0 ? 1 : l.tp), q->numel()) << p.name;
      const std::vector<double> got = toy::toy_param_values(p), whole = toy::toy_param_values(*q);
      double worst = 0.0;
      for (int64_t i = 0; i < p.numel(); ++i) {
        const double want =
            whole[static_cast<size_t>(tp_global_index(p, i, l.tp, (*lc)->grid.tp_rank()))];
        worst = std::max(worst, std::fabs(got[static_cast<size_t>(i)] - want));
      }
      EXPECT_LE(worst, atol) << p.name << " on rank " << rank;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ToyFamilyParallelTest, ::testing::Values(DType::kF64, DType::kF32),
                         [](const ::testing::TestParamInfo<DType>& i) {
                           return i.param == DType::kF64 ? "f64" : "f32";
                         });

}  // namespace
}  // namespace anvil::model
