// Checkpoints load into any layout (resharding on load), on the CPU under mpirun np 1, 2, 4, 8: a
// tiny GPT (dropout on, f32) is trained 3 steps, saved, and continued for 3 more steps after
// loading into another layout; the losses of steps 4-6 equal those of one rank training 6
// steps without stopping (to f32 rounding: relative 1e-5, as gpt_parallel_test). Both ways for
// every layout of the world: saved by one rank and loaded into the layout (TP splits incl.
// c_attn's q|k|v blocks, pipeline stages, ZeRO pieces, sequence parallelism), and saved by the
// layout (every rank writes its boxes) and loaded by one rank; and each layout's checkpoint
// loaded into the next layout of the same world (e.g. DP4 ZeRO-2 -> TP2 x DP2 ZeRO-1).
// For GPT-2 and for the architecture variants whose tensors differ (docs/models.md): BLOOM-style
// (no wpe, wte_ln) and LLaMA-style (no biases, RMSNorm without betas, SwiGLU's c_fc g | u blocks
// split over TP in two parts, untied lm_head.weight on the last stage).
#include <mpi.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "model/train/checkpoint.h"
#include "model/train/trainer.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/tiny_training.h"

namespace anvil::model {
namespace {

constexpr int kSaveStep = 3, kSteps = 6;

struct Layout {
  int tp = 1, pp = 1, dp = 1, zero_stage = 0;
  bool sequence_parallel = false;
  int virtual_stages = 1;
  int world() const { return tp * pp * dp; }
  std::string name() const {
    return absl::StrFormat("tp%d%s pp%dx%d dp%d zero%d", tp, sequence_parallel ? " sp" : "", pp,
                           virtual_stages, dp, zero_stage);
  }
};

// The model variant under test: sets the architecture options of a GPT-2 config.
using Arch = void (*)(GptConfig&);

TrainConfig config_for(const Layout& l, Arch arch) {
  TrainConfig c = testing_parallel::tiny_train_config();
  arch(c.model);
  c.model.padded_vocab = 256;  // the same padding in every layout (it enters the softmax)
  c.model.n_layers = 4;
  c.train.steps = kSteps;
  c.optim.schedule.decay_steps = kSteps;
  c.parallel.tp = l.tp;
  c.parallel.pp = l.pp;
  c.parallel.dp = l.dp;
  c.parallel.zero_stage = l.zero_stage;
  c.parallel.sequence_parallel = l.sequence_parallel;
  c.parallel.virtual_stages = l.virtual_stages;
  c.parallel.bucket_mb = 0.01;
  c.parallel.timeout_s = 120;
  return c;
}

// A trainer of layout l (one rank without communication when l.world() == 1) and its comms.
struct LayoutRun {
  std::unique_ptr<parallel::ProcessGrid> grid;
  std::unique_ptr<parallel::GroupComms> comms;
  std::unique_ptr<Trainer> trainer;
  TrainConfig cfg;
};

LayoutRun make_run(const Layout& l, Arch arch) {
  LayoutRun r;
  r.cfg = config_for(l, arch);
  TrainerParallel par;
  if (l.world() > 1) {
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    auto grid = parallel::ProcessGrid::create(world, rank, l.tp, l.pp, l.dp);
    ANVIL_CHECK_OK(grid.status());
    r.grid = std::make_unique<parallel::ProcessGrid>(*grid);
    parallel::CommOptions opt;
    opt.timeout_s = 120;
    auto comms = parallel::create_mpi_group_comms(*r.grid, opt);
    ANVIL_CHECK_OK(comms.status());
    r.comms = std::make_unique<parallel::GroupComms>(std::move(*comms));
    par.grid = r.grid.get();
    par.comms = r.comms.get();
  }
  auto t =
      Trainer::create(r.cfg, Precision{},
                      testing_parallel::hashed_samples(r.cfg.data.seq_len, r.cfg.model.vocab_size),
                      {}, engine::LogContext{}, par);
  ANVIL_CHECK_OK(t.status());
  r.trainer = std::move(*t);
  return r;
}

std::vector<double> train_until(Trainer& t, int64_t step) {
  std::vector<double> losses;
  while (t.steps_done() < step) losses.push_back(t.step().loss);
  return losses;
}

// bin/train's save: rank 0 begins, every rank of the run writes its boxes, rank 0 finishes.
void save(LayoutRun& r, const std::string& dir) {
  Trainer& t = *r.trainer;
  const int rank = r.grid ? r.grid->rank() : 0, world = r.grid ? r.grid->world() : 1;
  auto barrier = [&] {
    if (world > 1) MPI_Barrier(MPI_COMM_WORLD);
  };
  if (rank == 0) ANVIL_CHECK_OK(io::begin_checkpoint(dir, t.steps_done(), "test"));
  barrier();
  const std::string tmp = io::checkpoint_tmp_dir(dir, t.steps_done(), "test");
  ANVIL_CHECK_OK(io::write_checkpoint_shard(
      tmp, rank, t.model().checkpoint_slices(r.grid ? r.grid->dp_rank() : 0, t.stream())));
  barrier();
  if (rank == 0) {
    io::CheckpointInfo info;
    info.step = t.steps_done();
    info.state = checkpoint_counters(t.state(), r.cfg);
    ANVIL_CHECK_OK(io::finish_checkpoint(dir, tmp, world, info, 0));
  }
  barrier();
}

void load(LayoutRun& r, const std::string& dir) {
  auto c = io::Checkpoint::open(io::checkpoint_step_dir(dir, kSaveStep));
  ANVIL_CHECK_OK(c.status());
  ANVIL_CHECK_OK(r.trainer->model().load_checkpoint(
      [&](const std::string& name) { return c->read(name); }, false, r.trainer->stream()));
  auto st = trainer_state_from(c->info().state, r.cfg);
  ANVIL_CHECK_OK(st.status());
  r.trainer->restore(*st);
}

// A directory every rank agrees on (rank 0's pid), removed by rank 0 at the end.
class SharedDir {
 public:
  SharedDir() {
    long pid = static_cast<long>(::getpid());
    MPI_Bcast(&pid, 1, MPI_LONG, 0, MPI_COMM_WORLD);
    path_ = absl::StrCat(::testing::TempDir(), "anvil_reshard_", pid);
  }
  ~SharedDir() {
    MPI_Barrier(MPI_COMM_WORLD);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::error_code ec;
    if (rank == 0) std::filesystem::remove_all(path_, ec);
  }
  std::string sub(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

std::vector<Layout> layouts_for(int world) {
  const std::vector<Layout> all = {
      {1, 1, 1, 0},  // one rank: the plain round trip
      {2, 1, 1, 0},       {1, 2, 1, 0},           {1, 1, 2, 0}, {1, 1, 2, 1}, {1, 1, 2, 3},
      {2, 1, 1, 0, true}, {2, 2, 1, 0},           {1, 1, 4, 2}, {2, 1, 2, 1}, {1, 2, 2, 3},
      {2, 2, 1, 0, true}, {1, 2, 2, 0, false, 2}, {2, 2, 2, 3},
  };
  std::vector<Layout> out;
  for (const Layout& l : all) {
    if (l.world() == world) out.push_back(l);
  }
  return out;
}

void expect_same_losses(const std::vector<double>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), static_cast<size_t>(kSteps - kSaveStep));
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[kSaveStep + i], 1e-5 * std::abs(want[kSaveStep + i]))
        << "step " << kSaveStep + 1 + i;
  }
}

struct Variant {
  const char* name;
  Arch arch;
};

class CheckpointReshardTest : public ::testing::TestWithParam<Variant> {};

TEST_P(CheckpointReshardTest, EveryLayoutBothWays) {
  const Arch arch = GetParam().arch;
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const std::vector<Layout> layouts = layouts_for(world);
  if (layouts.empty()) GTEST_SKIP() << "no layout of " << world << " ranks";
  SharedDir dir;
  // The reference, and the single-rank checkpoint at step 3 (rank 0 writes it).
  LayoutRun ref = make_run(Layout{}, arch);
  const std::vector<double> want = train_until(*ref.trainer, kSteps);
  if (rank == 0) {
    LayoutRun one = make_run(Layout{}, arch);
    train_until(*one.trainer, kSaveStep);
    save(one, dir.sub("one"));
  }
  MPI_Barrier(MPI_COMM_WORLD);
  for (size_t k = 0; k < layouts.size(); ++k) {
    const Layout& l = layouts[k];
    SCOPED_TRACE(l.name());
    {
      SCOPED_TRACE("saved by one rank, loaded into the layout");
      LayoutRun r = make_run(l, arch);
      load(r, dir.sub("one"));
      expect_same_losses(train_until(*r.trainer, kSteps), want);
    }
    {
      SCOPED_TRACE("saved by the layout, loaded into one rank");
      const std::string from = dir.sub(absl::StrCat("layout", k));
      LayoutRun r = make_run(l, arch);
      train_until(*r.trainer, kSaveStep);
      save(r, from);
      LayoutRun one = make_run(Layout{}, arch);
      load(one, from);
      expect_same_losses(train_until(*one.trainer, kSteps), want);
    }
  }
  // Layout to layout directly: each layout's checkpoint into the next layout of this world.
  for (size_t k = 0; k < layouts.size(); ++k) {
    const Layout& to = layouts[(k + 1) % layouts.size()];
    SCOPED_TRACE(absl::StrCat("saved by ", layouts[k].name(), ", loaded into ", to.name()));
    LayoutRun r = make_run(to, arch);
    load(r, dir.sub(absl::StrCat("layout", k)));
    expect_same_losses(train_until(*r.trainer, kSteps), want);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, CheckpointReshardTest,
                         ::testing::Values(Variant{"Gpt2", [](GptConfig&) {}},
                                           Variant{"BloomStyle",
                                                   [](GptConfig& m) {
                                                     m.position_embedding =
                                                         PositionEmbedding::kAlibi;
                                                     m.embed_layernorm = true;
                                                   }},
                                           Variant{"LlamaStyle",
                                                   [](GptConfig& m) {
                                                     m.norm = Norm::kRmsNorm;
                                                     m.activation = Activation::kSwiglu;
                                                     m.position_embedding =
                                                         PositionEmbedding::kRotary;
                                                     m.bias = false;
                                                     m.tie_embeddings = false;
                                                     m.ffn_hidden = 96;
                                                   }}),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

}  // namespace
}  // namespace anvil::model
