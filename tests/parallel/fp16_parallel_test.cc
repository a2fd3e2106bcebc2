// fp16 with dynamic loss scaling across ranks on the CPU (mpirun -np 1, 2, 4): data parallelism
// (ZeRO 0 and 1) and, on 2 and 4 ranks, pipeline parallelism (pp 2, dp 1 or 2) train like the
// single-rank fp16 run with the same global batch: the same steps overflow and are skipped
// (an overflow in any rank's micro-batches or stage reaches every rank through the reduced
// gradient norm), the same loss scale after every step, and losses equal to f16 rounding.
// Every rank trains the single-rank reference itself (no communication), then compares.
#include <mpi.h>

#include <cmath>
#include <string>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "model/train/trainer.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model {
namespace {

// tiny_train_config in fp16, 8 steps, starting at 2^22: a few overflow-skipped steps, then
// training (the scale settles around 2^19 for this model).
TrainConfig fp16_config() {
  TrainConfig c = testing_parallel::tiny_train_config();
  c.train.steps = 8;
  c.optim.schedule.decay_steps = 8;
  c.train.precision.mode = "fp16";
  c.train.precision.dynamic.initial_scale = std::ldexp(1.0, 22);
  c.train.precision.dynamic.window = 2;  // growth (and new overflows) within the run
  return c;
}

const Precision kCpuF16{engine::Device::kCpu, engine::DType::kF16, engine::DType::kF32};

std::vector<StepStats> train(const TrainConfig& cfg, const TrainerParallel& par) {
  auto t = Trainer::create(cfg, kCpuF16,
                           testing_parallel::hashed_samples(cfg.data.seq_len, cfg.model.vocab_size),
                           {}, engine::LogContext{}, par);
  ANVIL_CHECK_OK(t.status());
  std::vector<StepStats> out;
  for (int64_t i = 0; i < cfg.train.steps; ++i) out.push_back((*t)->step());
  return out;
}

struct Layout {
  int pp, dp, zero_stage;
};

TEST(Fp16ParallelTest, LayoutsSkipAndScaleLikeOneRank) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<StepStats> ref = train(fp16_config(), TrainerParallel{});
  int skipped = 0;
  for (const StepStats& st : ref) skipped += st.skipped;
  ASSERT_GE(skipped, 2);  // the test must see overflows
  ASSERT_LE(skipped, 6);  // and applied steps

  std::vector<Layout> layouts = {{1, world, 0}, {1, world, 1}};
  if (world % 2 == 0) layouts.push_back({2, world / 2, 0});
  for (const Layout& l : layouts) {
    SCOPED_TRACE("pp " + std::to_string(l.pp) + " dp " + std::to_string(l.dp) + " zero " +
                 std::to_string(l.zero_stage));
    TrainConfig cfg = fp16_config();
    cfg.parallel.pp = l.pp;
    cfg.parallel.dp = l.dp;
    cfg.parallel.zero_stage = l.zero_stage;
    cfg.parallel.reduce_single_rank = true;
    cfg.parallel.bucket_mb = 0.01;
    auto grid = parallel::ProcessGrid::create(world, rank, 1, l.pp, l.dp);
    ASSERT_TRUE(grid.ok()) << grid.status();
    parallel::CommOptions opt;
    opt.timeout_s = 120;
    auto comms = parallel::create_mpi_group_comms(*grid, opt);
    ASSERT_TRUE(comms.ok()) << comms.status();
    TrainerParallel par;
    par.grid = &*grid;
    par.comms = &*comms;
    const std::vector<StepStats> run = train(cfg, par);
    ASSERT_EQ(run.size(), ref.size());
    for (size_t i = 0; i < ref.size(); ++i) {
      EXPECT_EQ(run[i].skipped, ref[i].skipped) << "step " << i + 1;
      EXPECT_EQ(run[i].loss_scale, ref[i].loss_scale) << "step " << i + 1;
      // f16 compute copies of nearly equal f32 masters: a rounding apart at most.
      EXPECT_NEAR(run[i].loss, ref[i].loss, 1e-3 * ref[i].loss) << "step " << i + 1;
    }
  }
}

}  // namespace
}  // namespace anvil::model
