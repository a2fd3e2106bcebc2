// T5 training state across ranks on the CPU under mpirun (np 1, 2, 4, 8), through
// model::Trainer:
//  - ZeRO: dp = world (up to 4) with zero_stage 0-3 (on one rank over a DP group of one:
//    reduce_single_rank), on 4 ranks tp 2 x dp 2 (also with sequence
//    parallelism and full recomputation) and pp 2 x dp 2 with ZeRO 2 and 3, on 8 ranks pp 4 x dp 2
//    with ZeRO 2 and 3 (stages past block 0: the relative tables' copies), train to the single-rank
//    run's losses, gradient norms and parameters (every rank also trains the single-rank reference
//    itself, in f64: the logic must be exact up to summation order, relative 1e-12 for losses and
//    norms, 1e-12 absolute for parameters matched by name and, under TP, global element; 1e-7 with
//    pp 4, whose relative tables' gradients are rounded to f32 per stage); with ZeRO the AdamW
//    moments are a 1/dp shard, from stage 2 the gradients and at 3 the parameters too.
//  - Checkpoints, for every layout of the world (TP, DP with ZeRO 1, 2 and 3, PP2 with the
//    encoder and the decoder on different stages, PP4 with each stack over two stages, TP2 x
//    DP2 ZeRO 1 and 3, TP2 x PP2, PP2 x DP2 ZeRO 1 and 3, TP2 x PP2 x DP2 ZeRO 1 and 3; T5 v1.0
//    where the tied LM head puts the shared embedding on the last stage too), as
//    checkpoint_reshard_test does for GPT: a run saved at step 3 by every rank (bin/train's three
//    phases with barriers) and resumed by fresh trainers of the layout gives bitwise the losses of
//    steps 4-6 of its uninterrupted run (f32; dropout on without TP, off with it: its FFN-hidden
//    masks differ from one rank's); the same checkpoint loaded by a single-rank trainer, and a
//    single-rank checkpoint loaded into the layout, continue to the single-rank run's losses within
//    1e-5 relative (f32 sums over TP / DP / stages run in another order than on one rank).
//  - Optimizer offload with dp 1 and 2 and ZeRO 0-2 equals the run without it, bitwise.
#include <mpi.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/t5/t5_checkpoint.h"
#include "model/t5/t5_train_model.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/io/io_test_util.h"
#include "tests/parallel/tiny_t5_training.h"

namespace anvil::model {
namespace {

using testing_parallel::hashed_t5_samples;
using testing_parallel::tiny_t5_train_config;

Precision cpu(engine::DType dt) { return Precision{engine::Device::kCpu, dt, dt}; }

// The MPI world as a (tp, pp, dp) grid with its CPU communicators.
struct Launch {
  int world = 1, rank = 0;
  std::unique_ptr<parallel::ProcessGrid> grid;
  std::unique_ptr<parallel::GroupComms> comms;
  TrainerParallel par() const { return TrainerParallel{grid.get(), comms.get(), nullptr, 0}; }
};

std::unique_ptr<Launch> launch(int tp, int pp, int dp) {
  auto l = std::make_unique<Launch>();
  MPI_Comm_size(MPI_COMM_WORLD, &l->world);
  MPI_Comm_rank(MPI_COMM_WORLD, &l->rank);
  auto grid = parallel::ProcessGrid::create(l->world, l->rank, tp, pp, dp);
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

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

std::unique_ptr<Trainer> make_trainer(const TrainConfig& cfg, engine::DType dt,
                                      const TrainerParallel& par) {
  auto t = Trainer::create(
      cfg, cpu(dt),
      hashed_t5_samples(cfg.data.seq_len, cfg.data.decoder_seq_len, t5_config(cfg).vocab_size), {},
      engine::LogContext{}, par);
  ANVIL_CHECK_OK(t.status());
  return std::move(*t);
}

// Every parameter value this rank holds, gathered whole (ZeRO-3 holds a shard), flat layout.
std::vector<double> flat_values(T5Model& m, engine::Stream& s) {
  std::vector<double> flat(static_cast<size_t>(m.params().flat_numel()));
  m.gather_values(engine::make_view(flat.data(), engine::DType::kF64, engine::Device::kCpu,
                                    {m.params().flat_numel()}),
                  s);
  return flat;
}

// max |parameter - the single-rank model's| over this rank's parameters, matched by name and,
// under TP, by global element.
double max_param_diff(Trainer& t, Trainer& ref, int tp, int tp_rank) {
  const std::vector<double> got = flat_values(t5_model(t.model()), t.stream());
  const std::vector<double> want = flat_values(t5_model(ref.model()), ref.stream());
  double most = 0.0;
  for (const Param& p : t5_model(t.model()).params().all()) {
    const Param* q = t5_model(ref.model()).params().find(p.name);
    EXPECT_NE(q, nullptr) << p.name;
    if (q == nullptr) continue;
    for (int64_t i = 0; i < p.numel(); ++i) {
      const double w = want[static_cast<size_t>(q->offset + tp_global_index(p, i, tp, tp_rank))];
      most = std::max(most, std::abs(got[static_cast<size_t>(p.offset + i)] - w));
    }
  }
  return most;
}

// A (tp, pp, dp = the rest) layout with a ZeRO stage; the first half of the pp stages holds the
// encoder.
struct ZeroLayout {
  int tp, pp, zero_stage;
  bool sp_recompute = false;  // sequence parallelism (tp > 1) and full recomputation
};

class T5ZeroTest : public ::testing::TestWithParam<ZeroLayout> {};

TEST_P(T5ZeroTest, EqualsOneRankWithTheSameGlobalBatch) {
  const auto [tp, pp, zero_stage, sp_recompute] = GetParam();
  const int world = world_size();
  if (tp * pp > 1 && world != 2 * tp * pp) {
    GTEST_SKIP() << "tp " << tp << " x pp " << pp << " runs with dp 2";
  }
  TrainConfig ref_cfg = tiny_t5_train_config(3);
  // Under TP the FFN-hidden dropout masks are not one rank's (model/t5/t5.h).
  if (tp > 1) t5_config(ref_cfg).dropout = 0.0f;
  std::unique_ptr<Trainer> ref = make_trainer(ref_cfg, engine::DType::kF64, {});
  const int dp_size = world / (tp * pp);
  if (ref_cfg.train.global_batch < ref_cfg.train.micro_batch * dp_size) {
    GTEST_SKIP() << "a global batch of " << ref_cfg.train.global_batch << " over dp " << dp_size;
  }
  std::unique_ptr<Launch> l = launch(tp, pp, dp_size);
  TrainConfig cfg = ref_cfg;
  cfg.parallel.tp = tp;
  cfg.parallel.pp = pp;
  cfg.parallel.pp_split_rank = pp / 2;  // pp 4: a stage per block, the relative-table copies
  cfg.parallel.dp = dp_size;
  cfg.parallel.zero_stage = zero_stage;
  // One rank (np 1): ZeRO over a DP group of one, through the reduction path (MpiComm).
  cfg.parallel.reduce_single_rank = dp_size == 1 && zero_stage > 0;
  if (sp_recompute) {
    cfg.parallel.sequence_parallel = true;
    cfg.parallel.recompute = "full";
  }
  std::unique_ptr<Trainer> dp = make_trainer(cfg, engine::DType::kF64, l->par());
  if (zero_stage > 0) {
    const int64_t n = t5_model(dp->model()).params().flat_numel();
    const FlatBuffers fb = t5_model(dp->model()).flat_buffers();
    EXPECT_EQ(fb.m.numel(), n / dp_size);  // the moments are a shard
    EXPECT_EQ(fb.grad.empty(), zero_stage >= 2);
    EXPECT_EQ(fb.value.numel(), zero_stage == 3 ? n / dp_size : n);
  }
  // A stack over several stages (pp 4) rounds each stage's part of its relative table's gradient
  // to f32 (t5_pipeline_test): the run differs by ~1e-9 relative after three steps.
  const double tol = pp > 2 ? 1e-7 : 1e-12;
  for (int i = 0; i < 3; ++i) {
    const StepStats r = ref->step(), d = dp->step();
    EXPECT_NEAR(d.loss, r.loss, tol * r.loss) << "step " << i + 1;
    EXPECT_NEAR(d.grad_norm, r.grad_norm, tol * r.grad_norm) << "step " << i + 1;
  }
  EXPECT_LE(max_param_diff(*dp, *ref, tp, l->grid->tp_rank()), tol);
  // The parameters moved (not two untouched initializations).
  TrainConfig still = ref_cfg;
  still.train.steps = 0;
  EXPECT_GT(max_param_diff(*make_trainer(still, engine::DType::kF64, {}), *ref, 1, 0), 1e-3);
}

std::string zero_layout_name(const ::testing::TestParamInfo<ZeroLayout>& info) {
  const ZeroLayout& z = info.param;
  return absl::StrCat(z.tp > 1 ? absl::StrCat("Tp", z.tp) : "",
                      z.pp > 1 ? absl::StrCat("Pp", z.pp) : "", "DpZero", z.zero_stage,
                      z.sp_recompute ? "SpRecompute" : "");
}

INSTANTIATE_TEST_SUITE_P(Layouts, T5ZeroTest,
                         ::testing::Values(ZeroLayout{1, 1, 0}, ZeroLayout{1, 1, 1},
                                           ZeroLayout{1, 1, 2}, ZeroLayout{1, 1, 3},
                                           ZeroLayout{2, 1, 2}, ZeroLayout{2, 1, 3},
                                           ZeroLayout{2, 1, 2, true}, ZeroLayout{2, 1, 3, true},
                                           ZeroLayout{1, 2, 2}, ZeroLayout{1, 2, 3},
                                           ZeroLayout{1, 4, 2}, ZeroLayout{1, 4, 3}),
                         zero_layout_name);

// Optimizer offload (T5Shard::offload_optimizer) on the CPU, where the host path is the real one
// (host AdamW on the offload's own master / m / v, copies in and out): with dp = world (1 or 2
// ranks) and ZeRO 0, 1 and 2 (one rank: over a DP group of one), three f32 steps with offload
// give bitwise the losses, gradient norms and parameters of the run without it; the plan keeps
// no optimizer state on the device and states the host bytes.
TEST(T5OffloadTest, EqualsTheRunWithoutOffload) {
  const int world = world_size();
  if (world > 2) GTEST_SKIP() << "runs with dp = 1 and 2";
  for (int zero : {0, 1, 2}) {
    SCOPED_TRACE(absl::StrCat("dp ", world, " zero ", zero));
    std::vector<double> stats[2], values[2];
    for (bool offload : {false, true}) {
      std::unique_ptr<Launch> l = launch(1, 1, world);
      TrainConfig cfg = tiny_t5_train_config(3);
      cfg.parallel.dp = world;
      cfg.parallel.zero_stage = zero;
      cfg.parallel.reduce_single_rank = world == 1 && zero > 0;
      cfg.parallel.offload_optimizer = offload;
      cfg.parallel.offload_threads = 2;
      std::unique_ptr<Trainer> t = make_trainer(cfg, engine::DType::kF32, l->par());
      // Every parameter value (f32), gathered whole.
      T5Model& tm = t5_model(t->model());
      auto gather = [&] {
        std::vector<float> flat(static_cast<size_t>(tm.params().flat_numel()));
        tm.gather_values(engine::make_view(flat.data(), engine::DType::kF32, engine::Device::kCpu,
                                           {tm.params().flat_numel()}),
                         t->stream());
        return std::vector<double>(flat.begin(), flat.end());
      };
      const std::vector<double> initial = gather();
      for (int i = 0; i < 3; ++i) {
        const StepStats s = t->step();
        stats[offload].push_back(s.loss);
        stats[offload].push_back(s.grad_norm);
      }
      values[offload] = gather();
      EXPECT_NE(values[offload], initial);  // the steps moved the parameters
      if (!offload) continue;
      const T5RunShape shape{cfg.train.micro_batch, cfg.data.seq_len, cfg.data.decoder_seq_len};
      auto plan = T5Model::plan(tm.config(), shape, cpu(engine::DType::kF32), tm.shard());
      ASSERT_TRUE(plan.ok()) << plan.status();
      EXPECT_EQ(plan->category_bytes("optimizer"), 0u);
      auto host =
          T5Model::offload_host_bytes(tm.config(), shape, cpu(engine::DType::kF32), tm.shard());
      ASSERT_TRUE(host.ok()) << host.status();
      // f32 master, m, v, gradient staging and the compute-copy staging of the rank's state.
      EXPECT_GE(*host, static_cast<size_t>(tm.params().flat_numel() / (zero > 0 ? world : 1)) * 20);
    }
    EXPECT_EQ(stats[0], stats[1]);
    EXPECT_EQ(values[0], values[1]);
  }
  // ZeRO-3 with offload is refused, naming the stage.
  TrainConfig cfg = tiny_t5_train_config(3);
  const T5Config& t5 = t5_config(cfg);
  T5Shard shard;
  shard.zero_stage = 3;
  shard.zero_dp = 2;
  shard.offload_optimizer = true;
  EXPECT_NE(shard.validate(t5).message().find("ZeRO stage 3"), std::string::npos)
      << shard.validate(t5);
}

constexpr int kSaveStep = 3, kSteps = 6;

// A layout: tp x pp x dp ranks (pp > 1 splits at pp / 2: the encoder's stages first), ZeRO
// stage zero_stage; tied: T5 v1.0 (the shared embedding also on the last stage, as the LM
// head), else v1.1; dropout on or off.
struct Layout {
  int tp = 1, pp = 1, dp = 1, zero_stage = 0;
  bool tied = false, dropout = true;
  int world() const { return tp * pp * dp; }
  std::string name() const {
    return absl::StrFormat("tp%d pp%d dp%d zero%d %s%s", tp, pp, dp, zero_stage,
                           tied ? "v1.0" : "v1.1", dropout ? "" : " no dropout");
  }
};

std::vector<Layout> layouts_for(int world) {
  const std::vector<Layout> all = {
      // one rank: the plain round trip
      {1, 1, 1, 0},
      {1, 1, 1, 0, true},
      // 2 ranks: TP2, DP2 ZeRO-1, 2 and 3, PP2 (encoder | decoder; v1.0 and v1.1)
      {2, 1, 1, 0},
      {1, 1, 2, 1},
      {1, 1, 2, 2},
      {1, 1, 2, 3},
      {1, 2, 1, 0, true},
      {1, 2, 1, 0},
      // 4 ranks: TP4, DP4 ZeRO-1, TP2xDP2 ZeRO-1 and 3, TP2xPP2, PP4 (each stack over two
      // stages), PP2xDP2 ZeRO-1 and 3
      {4, 1, 1, 0},
      {1, 1, 4, 1},
      {2, 1, 2, 1},
      {2, 1, 2, 3},
      {2, 2, 1, 0},
      {1, 4, 1, 0, true},
      {1, 2, 2, 1, true},
      {1, 2, 2, 3, true},
      // 8 ranks: TP2xPP2xDP2 ZeRO-1 and 3
      {2, 2, 2, 1},
      {2, 2, 2, 3},
  };
  std::vector<Layout> out;
  for (Layout l : all) {
    // Under TP the FFN-hidden dropout masks are not one rank's (model/t5/t5.h): no dropout there,
    // so that the single-rank runs follow the same function.
    l.dropout = l.tp == 1;
    if (l.world() == world) out.push_back(l);
  }
  return out;
}

TrainConfig config_for(const Layout& l) {
  TrainConfig c = tiny_t5_train_config(kSteps);
  if (l.tied) t5_config(c).version = T5Version::kV1_0;
  if (!l.dropout) t5_config(c).dropout = 0.0f;
  c.parallel.tp = l.tp;
  c.parallel.pp = l.pp;
  c.parallel.dp = l.dp;
  c.parallel.pp_split_rank = l.pp / 2;
  c.parallel.zero_stage = l.zero_stage;
  c.parallel.timeout_s = 120;
  return c;
}

// A trainer of layout l (one rank without communication when l.world() == 1).
struct LayoutRun {
  std::unique_ptr<Launch> mpi;  // null on one rank
  std::unique_ptr<Trainer> trainer;
  TrainConfig cfg;
};

LayoutRun make_run(const Layout& l) {
  LayoutRun r;
  r.cfg = config_for(l);
  if (l.world() > 1) r.mpi = launch(l.tp, l.pp, l.dp);
  r.trainer = make_trainer(r.cfg, engine::DType::kF32, r.mpi ? r.mpi->par() : TrainerParallel{});
  return r;
}

// Layout l's model on one rank.
Layout single(const Layout& l) {
  Layout one;
  one.tied = l.tied;
  one.dropout = l.dropout;
  return one;
}

// Rank 0's scratch directory, its path the same on every rank.
std::string shared_dir(std::unique_ptr<io::testing::ScratchDir>& owned) {
  std::array<char, 512> path{};
  if (world_rank() == 0) {
    owned = std::make_unique<io::testing::ScratchDir>();
    std::snprintf(path.data(), path.size(), "%s", owned->path().c_str());
  }
  MPI_Bcast(path.data(), static_cast<int>(path.size()), MPI_CHAR, 0, MPI_COMM_WORLD);
  return path.data();
}

// bin/train's save: rank 0 begins, every rank of the run writes its boxes, rank 0 finishes.
absl::Status save(LayoutRun& r, const std::string& dir) {
  Trainer& t = *r.trainer;
  const int rank = r.mpi ? r.mpi->rank : 0, world = r.mpi ? r.mpi->world : 1;
  auto barrier = [&] {
    if (world > 1) MPI_Barrier(MPI_COMM_WORLD);
  };
  const int64_t step = t.steps_done();
  if (rank == 0) ANVIL_RETURN_IF_ERROR(io::begin_checkpoint(dir, step, "test"));
  barrier();
  const std::string tmp = io::checkpoint_tmp_dir(dir, step, "test");
  const int dp_rank = r.mpi ? r.mpi->grid->dp_rank() : 0;
  ANVIL_RETURN_IF_ERROR(io::write_checkpoint_shard(
      tmp, rank, t5_checkpoint_slices(t5_model(t.model()), dp_rank, t.stream())));
  barrier();
  if (rank == 0) {
    io::CheckpointInfo info;
    info.step = step;
    info.model = checkpoint_model_record(r.cfg);
    info.state = checkpoint_counters(t.state(), r.cfg);
    info.layout = checkpoint_layout(r.cfg);
    info.lr_schedule = checkpoint_lr_schedule(r.cfg, t.state());
    ANVIL_RETURN_IF_ERROR(io::finish_checkpoint(dir, tmp, world, info, 0));
  }
  barrier();
  return absl::OkStatus();
}

absl::Status load(LayoutRun& r, const std::string& dir) {
  Trainer& t = *r.trainer;
  ANVIL_ASSIGN_OR_RETURN(io::Checkpoint c, io::open_newest_complete(dir, -1, [](const auto&) {}));
  ANVIL_RETURN_IF_ERROR(check_checkpoint_model(c.info().model, r.cfg, c.dir()));
  ANVIL_RETURN_IF_ERROR(t5_load_checkpoint(
      t5_model(t.model()), [&](const std::string& name) { return c.read(name); }, false,
      t.stream()));
  ANVIL_ASSIGN_OR_RETURN(TrainerState s, trainer_state_from(c.info().state, r.cfg));
  t.restore(s);
  return absl::OkStatus();
}

std::vector<double> train_until(Trainer& t, int64_t step) {
  std::vector<double> losses;
  while (t.steps_done() < step) losses.push_back(t.step().loss);
  return losses;
}

void expect_near_losses(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps - kSaveStep));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[kSaveStep + i], 1e-5 * want[kSaveStep + i])
        << "step " << kSaveStep + 1 + i;
  }
}

TEST(T5ResumeTest, EveryLayoutContinuesBitwiseAndReshardsBothWays) {
  const int world = world_size();
  const std::vector<Layout> layouts = layouts_for(world);
  if (layouts.empty()) GTEST_SKIP() << "no layout of " << world << " ranks";
  std::unique_ptr<io::testing::ScratchDir> owned;
  const std::string dir = shared_dir(owned);
  for (size_t k = 0; k < layouts.size(); ++k) {
    const Layout& l = layouts[k];
    SCOPED_TRACE(l.name());
    const std::vector<double> want_one = train_until(*make_run(single(l)).trainer, kSteps);
    const std::vector<double> want = train_until(*make_run(l).trainer, kSteps);
    const std::string from_layout = absl::StrCat(dir, "/layout", k);
    {
      LayoutRun first = make_run(l);
      train_until(*first.trainer, kSaveStep);
      const absl::Status saved = save(first, from_layout);
      ASSERT_TRUE(saved.ok()) << saved;
    }
    {
      SCOPED_TRACE("resumed in the layout: bitwise");
      LayoutRun second = make_run(l);
      const absl::Status loaded = load(second, from_layout);
      ASSERT_TRUE(loaded.ok()) << loaded;
      EXPECT_EQ(second.trainer->steps_done(), kSaveStep);
      const std::vector<double> got = train_until(*second.trainer, kSteps);
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i], want[kSaveStep + i]) << "step " << kSaveStep + 1 + i;
      }
    }
    {
      SCOPED_TRACE("saved by the layout, loaded into one rank");
      LayoutRun one = make_run(single(l));
      const absl::Status loaded = load(one, from_layout);
      ASSERT_TRUE(loaded.ok()) << loaded;
      expect_near_losses(train_until(*one.trainer, kSteps), want_one);
    }
    {
      SCOPED_TRACE("saved by one rank, loaded into the layout");
      const std::string from_one = absl::StrCat(dir, "/one", k);
      if (world_rank() == 0) {
        LayoutRun one = make_run(single(l));
        train_until(*one.trainer, kSaveStep);
        const absl::Status saved = save(one, from_one);
        EXPECT_TRUE(saved.ok()) << saved;
      }
      MPI_Barrier(MPI_COMM_WORLD);
      LayoutRun r = make_run(l);
      const absl::Status loaded = load(r, from_one);
      ASSERT_TRUE(loaded.ok()) << loaded;
      expect_near_losses(train_until(*r.trainer, kSteps), want_one);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);  // every rank has read before rank 0 removes the directory
}

}  // namespace
}  // namespace anvil::model
