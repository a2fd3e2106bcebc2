// Data-parallel finetuning (model/tasks/finetune_cls.h, ClsParallel) under mpirun with 1, 2 and 4
// ranks on the CPU: 3 steps with dp = world size give the losses, gradient norms, model and
// head parameters and the dev accuracy / loss of the single-rank run on the same global batch,
// for the linear classification head, the multiple-choice head (with dropout on: the masks are
// numbered by the global micro-batch, the same on every layout) and the label-word head. Every
// rank also runs the single-rank reference itself (no communication), then compares.
// Tolerances: the model runs in double, but the head's parameters and gradients are f32 (as its
// master weights on the GPU), so the sum over ranks in another order rounds differently at the
// f32 level and AdamW carries that into the next steps: losses, norms and dev loss relative
// 1e-6, parameters absolute 1e-4 = lr / 100 (as tests/parallel/dp_training_test.cc). A wrong
// scale or a missing reduction moves the norm by a factor of about dp.
#include <mpi.h>

#include <cmath>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "model/tasks/finetune_cls.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

struct RunResult {
  std::vector<double> losses, norms, params, head;
  ClsResult dev;
};

GptConfig tiny(float dropout) {
  GptConfig cfg;
  cfg.vocab_size = 29;
  cfg.max_seq_len = 12;
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  cfg.hidden_dropout = dropout;
  return cfg;
}

// Random examples of 3-12 tokens (choices > 1: that many sequences each), labels < classes.
std::vector<ClsExample> examples(int n, int64_t classes, int64_t choices, uint64_t seed) {
  const std::vector<int32_t> r = testing::random_ints(n * 64, seed, 0, 1 << 20);
  size_t k = 0;
  std::vector<ClsExample> out;
  auto sequence = [&]() {
    std::vector<int32_t> t(static_cast<size_t>(3 + r[k++] % 10));
    for (int32_t& x : t) x = 3 + r[k++] % 26;
    return t;
  };
  for (int i = 0; i < n; ++i) {
    ClsExample e;
    e.label = static_cast<int32_t>(r[k++] % classes);
    if (choices > 1) {
      for (int64_t c = 0; c < choices; ++c) e.choices.push_back(sequence());
    } else {
      e.tokens = sequence();
    }
    out.push_back(e);
  }
  return out;
}

enum class Kind { kLinear, kMultipleChoice, kLabelWords };

RunResult train(Kind kind, const ClsParallel& par) {
  const bool mc = kind == Kind::kMultipleChoice;
  const GptConfig cfg = tiny(mc ? 0.1f : 0.0f);
  const Precision f64{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  const int64_t per = 2, choices = mc ? 4 : 1;  // examples per forward
  const GptRunShape shape{per * choices, 12};
  engine::Stream s = engine::Stream::cpu();
  auto m = GptModel::create(cfg, shape, f64, 3);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<ClsTask> task =
      kind == Kind::kLabelWords
          ? ClsTask::create({4, 5, 6}, cfg.vocab_size, 0)
          : ClsTask::create_linear(blocks::LinearHead(cfg.d_model, mc ? 4 : 3, choices, 0.3f, 4),
                                   cfg.vocab_size, 0);
  EXPECT_TRUE(task.ok()) << task.status();
  if (task->head() != nullptr) (*m)->set_hidden_head(true);
  const std::vector<ClsExample> data = examples(48, mc ? 4 : 3, choices, 7);
  RunResult r;
  for (int step = 1; step <= 3; ++step) {
    double norm = 0.0;
    // 16 examples per step: 8 micro-batches of 2 on one rank, 8 / dp on each of dp ranks.
    const absl::Span<const ClsExample> batch =
        absl::MakeConstSpan(data).subspan((step - 1) * 16, 16);
    r.losses.push_back(task->train_step(
        **m, shape, batch, {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step}, 1.0, s, &norm, par));
    r.norms.push_back(norm);
  }
  r.params = testing::to_host_f64((*m)->flat_buffers().value);
  if (task->head() != nullptr) {
    r.head.assign(task->head()->values().begin(), task->head()->values().end());
  }
  r.dev = task->evaluate(**m, shape, examples(13, mc ? 4 : 3, choices, 9), s, par);
  return r;
}

// |got - want| <= rel * |want| + abs, elementwise.
void expect_near(const std::vector<double>& got, const std::vector<double>& want, double rel,
                 double abs, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], rel * std::abs(want[i]) + abs) << what << " " << i;
  }
}

TEST(FinetuneDp, DataParallelEqualsOneRank) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  auto grid = parallel::ProcessGrid::create(world, rank, 1, 1);
  ASSERT_TRUE(grid.ok());
  parallel::CommOptions opt;
  opt.timeout_s = 120;
  auto comms = parallel::create_mpi_group_comms(*grid, opt);
  ASSERT_TRUE(comms.ok()) << comms.status();
  ClsParallel par{comms->dp.get(), comms->dp.get(), world, grid->dp_rank()};
  for (Kind kind : {Kind::kLinear, Kind::kMultipleChoice, Kind::kLabelWords}) {
    SCOPED_TRACE(static_cast<int>(kind));
    const RunResult ref = train(kind, {});
    const RunResult dp = train(kind, par);
    expect_near(dp.losses, ref.losses, 1e-6, 0.0, "loss");
    expect_near(dp.norms, ref.norms, 1e-6, 0.0, "grad norm");
    expect_near(dp.params, ref.params, 0.0, 1e-4, "model parameter");
    expect_near(dp.head, ref.head, 0.0, 1e-4, "head parameter");
    EXPECT_EQ(dp.dev.total, 13);
    EXPECT_EQ(dp.dev.correct, ref.dev.correct);
    EXPECT_NEAR(dp.dev.loss_sum, ref.dev.loss_sum, 1e-6 * ref.dev.loss_sum);
    EXPECT_GT(ref.norms[0], 0.0);
  }
}

}  // namespace
}  // namespace anvil::model
