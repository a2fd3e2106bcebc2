// Finetuning with tensor and pipeline parallelism (model/tasks/finetune_cls.h, ClsParallel) under
// mpirun on the CPU: with 2 ranks TP2 (also with sequence parallelism) and PP2, with 4 ranks
// TP2xPP2, TP2xDP2 and PP2xDP2. A
// tiny GPT (linear classification head, label-word head, multiple-choice head with dropout on)
// and a tiny BERT (linear head with its pooler, token types) train 3 steps of 16 examples each;
// the losses, gradient norms, head parameters (on the last stage) and the dev accuracy and loss
// must equal the single-rank run's, which every rank also computes itself (no communication).
// Tolerances as tests/parallel/finetune_dp_test.cc: the model runs in double, the head's
// parameters and gradients are f32 (its master weights), so sums in another order round at the
// f32 level and AdamW carries that on: losses, norms and dev loss relative 1e-6, head
// parameters absolute 1e-4 = lr / 100, dev accuracy exact. A missing TP gather of the label
// logits, a head gradient counted tp times, a missing tied-embedding sum between the stages or
// a loss not shared from the last stage moves these by far more.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gtest/gtest.h"
#include "model/tasks/finetune_cls.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/world_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

enum class Kind { kLinear, kMultipleChoice, kLabelWords, kBertLinear };

struct Layout {
  int tp, pp, dp;
  bool sequence_parallel = false;
  std::string name() const {
    return absl::StrFormat("tp%d pp%d dp%d%s", tp, pp, dp, sequence_parallel ? " sp" : "");
  }
};

struct RunResult {
  std::vector<double> losses, norms, head;  // head: empty off the last stage
  ClsResult dev;
};

GptConfig tiny(Kind kind) {
  GptConfig cfg;
  cfg.vocab_size = 29;
  cfg.max_seq_len = 12;
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  cfg.hidden_dropout = kind == Kind::kMultipleChoice ? 0.1f : 0.0f;
  if (kind == Kind::kBertLinear) {
    cfg.causal = false;
    cfg.head = Head::kMlm;
    cfg.norm_placement = NormPlacement::kPost;
    cfg.type_vocab_size = 2;
    cfg.activation = Activation::kGeluErf;
    cfg.embed_layernorm = true;
  }
  return cfg;
}

// Random examples of 3-12 tokens (choices > 1: that many sequences each), labels < classes;
// with types, token types 0 for the first half of each sequence and 1 after.
std::vector<ClsExample> examples(int n, int64_t classes, int64_t choices, bool types,
                                 uint64_t seed) {
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
    if (types) {
      e.types.assign(e.tokens.size(), 0);
      for (size_t j = e.tokens.size() / 2; j < e.tokens.size(); ++j) e.types[j] = 1;
    }
    out.push_back(e);
  }
  return out;
}

// The groups of one layout (null grid: a single rank).
struct Groups {
  const parallel::ProcessGrid* grid = nullptr;
  parallel::GroupComms* comms = nullptr;
};

// 3 steps of 16 examples (2 per forward) and the dev set, under layout l.
RunResult train(Kind kind, const Layout& l, const Groups& g) {
  const bool mc = kind == Kind::kMultipleChoice, bert = kind == Kind::kBertLinear;
  const GptConfig cfg = tiny(kind);
  const Precision f64{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  const int64_t per = 2, choices = mc ? 4 : 1, classes = mc ? 4 : 3;
  const GptRunShape shape{per * choices, 12};
  const int stage = g.grid ? g.grid->pp_rank() : 0;
  GptShard sh;
  ClsParallel par;
  if (g.grid != nullptr) {
    sh.tp = l.tp;
    sh.tp_rank = g.grid->tp_rank();
    sh.tp_comm = l.tp > 1 ? g.comms->tp.get() : nullptr;
    sh.sequence_parallel = l.sequence_parallel;
    const int64_t layers = cfg.n_layers / l.pp;
    sh.chunks = {{}};
    for (int64_t i = 0; i < layers; ++i) sh.chunks[0].push_back(stage * layers + i);
    sh.pre = stage == 0;
    sh.post = stage == l.pp - 1;
    absl::StatusOr<int64_t> slots = cls_activation_slots(l.pp, stage, 16, per, l.dp);
    EXPECT_TRUE(slots.ok()) << slots.status();
    sh.act_slots = *slots;
    if (l.dp > 1) par = {g.comms->dp.get(), g.comms->dp.get(), l.dp, g.grid->dp_rank()};
    par.tp_host = l.tp > 1 ? g.comms->tp.get() : nullptr;
    if (l.pp > 1) {
      par.pp = l.pp;
      par.stage = stage;
      par.pp_comm = par.pp_host = g.comms->pp.get();
      par.embedding = g.comms->embedding.get();
    }
  }
  engine::Stream s = engine::Stream::cpu();
  auto m = GptModel::create(cfg, shape, f64, 3, sh);
  EXPECT_TRUE(m.ok()) << m.status();
  absl::StatusOr<ClsTask> task =
      kind == Kind::kLabelWords
          ? ClsTask::create({4, 5, 6}, cfg.vocab_size, 0)
          : ClsTask::create_linear(blocks::LinearHead(cfg.d_model, classes, choices, 0.3f, 4, bert),
                                   cfg.vocab_size, 0);
  EXPECT_TRUE(task.ok()) << task.status();
  if (task->head() != nullptr && sh.post) (*m)->set_hidden_head(true);
  const std::vector<ClsExample> data = examples(48, classes, choices, bert, 7);
  RunResult r;
  for (int step = 1; step <= 3; ++step) {
    double norm = 0.0;
    const absl::Span<const ClsExample> batch =
        absl::MakeConstSpan(data).subspan((step - 1) * 16, 16);
    r.losses.push_back(task->train_step(
        **m, shape, batch, {1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, step}, 1.0, s, &norm, par));
    r.norms.push_back(norm);
  }
  if (task->head() != nullptr && sh.post) {
    r.head.assign(task->head()->values().begin(), task->head()->values().end());
  }
  r.dev = task->evaluate(**m, shape, examples(13, classes, choices, bert, 9), s, par);
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

TEST(FinetuneModelParallel, TensorAndPipelineParallelEqualOneRank) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Layout> layouts;
  if (world == 2) layouts = {{2, 1, 1}, {2, 1, 1, true}, {1, 2, 1}};
  if (world == 4) layouts = {{2, 2, 1}, {2, 1, 2}, {1, 2, 2}};
  if (layouts.empty()) GTEST_SKIP() << "no model-parallel layout of " << world << " ranks";
  for (const Layout& l : layouts) {
    SCOPED_TRACE(l.name());
    auto lc = parallel::testing::layout_comms(l.tp, l.pp, l.dp);
    ASSERT_TRUE(lc.ok()) << lc.status();
    for (Kind kind : {Kind::kLinear, Kind::kMultipleChoice, Kind::kLabelWords, Kind::kBertLinear}) {
      SCOPED_TRACE(static_cast<int>(kind));
      const RunResult ref = train(kind, {1, 1, 1}, {});
      const RunResult run = train(kind, l, {&(*lc)->grid, &(*lc)->comms});
      expect_near(run.losses, ref.losses, 1e-6, 0.0, "loss");
      expect_near(run.norms, ref.norms, 1e-6, 0.0, "grad norm");
      if (!run.head.empty()) expect_near(run.head, ref.head, 0.0, 1e-4, "head parameter");
      EXPECT_EQ(run.dev.total, 13);
      EXPECT_EQ(run.dev.correct, ref.dev.correct);
      EXPECT_NEAR(run.dev.loss_sum, ref.dev.loss_sum, 1e-6 * ref.dev.loss_sum);
      EXPECT_GT(ref.norms[0], 0.0);
      EXPECT_GT(std::abs(ref.losses[2] - ref.losses[0]), 1e-6);  // the steps trained something
      if (rank == 0) {
        std::printf("%s kind %d: losses %.6f %.6f %.6f, dev %lld/13\n", l.name().c_str(),
                    static_cast<int>(kind), run.losses[0], run.losses[1], run.losses[2],
                    static_cast<long long>(run.dev.correct));
      }
    }
  }
}

}  // namespace
}  // namespace anvil::model
