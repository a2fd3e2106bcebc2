// Zero-shot evaluation on a parallel layout (model/tasks/eval_tasks.h, EvalParallel) under mpirun
// on the CPU: with 2 ranks TP2, PP2 and DP2, with 4 ranks TP2xPP2, TP2xDP2 and PP2xDP2. A tiny GPT
// in double (the same weights on every layout: initialization is per logical parameter)
// evaluates a token stream (evaluate_lm: overlapping windows, the last micro-batch partial, DP
// ranks with an empty last round) and cloze examples (evaluate_cloze), and every number must
// equal the single-rank run's, which every rank also computes itself (no communication): loss
// sums to 1e-12 relative (f64 sums in another order), counts exactly. Three cloze sets: each of
// 5 contexts followed by the single-rank model's greedy token, found by a direct forward and
// ops::row_argmax (all 5 correct: a TP rank that kept its slice's local best, dropped a slice
// or misplaced the vocabulary offset misses the contexts whose best token another rank
// holds); each context followed by every token of the vocabulary (exactly one correct per
// context); random two- and three-token targets. The vocabulary (29 tokens) is padded to 32
// (each TP rank holds real columns) and to 128 (TP rank 1 holds only padding). A TP or PP
// model without the communicators it needs is refused. Ties: with every parameter zero all
// logits are equal, and the greedy token is 0 (the smallest index) on one rank and over TP2's
// slices alike (a combine that let a later slice win a tie would pick 16); NaN logits win, the
// smallest-index NaN first, as torch.argmax.
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/memory.h"
#include "gtest/gtest.h"
#include "model/tasks/eval_tasks.h"
#include "ops/argmax.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/world_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

struct Layout {
  int tp, pp, dp;
  std::string name() const { return absl::StrFormat("tp%d pp%d dp%d", tp, pp, dp); }
};

GptConfig tiny(int64_t vocab_multiple) {
  GptConfig cfg;
  cfg.vocab_size = 29;
  cfg.vocab_multiple = vocab_multiple;
  cfg.max_seq_len = 8;
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  return cfg;
}

constexpr int64_t kBatch = 2, kSeq = 8;

std::vector<std::vector<int32_t>> contexts() {
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < 5; ++i) out.push_back(testing::random_ints(2 + 2 * i, 40 + i, 0, 29));
  return out;  // the longest (10 tokens) loses context to fit seq_len + 1
}

// Every token after every context: exactly one greedy-correct example per context.
std::vector<ClozeExample> every_token() {
  std::vector<ClozeExample> ex;
  for (const std::vector<int32_t>& c : contexts()) {
    for (int32_t t = 0; t < 29; ++t) ex.push_back({c, {t}});
  }
  return ex;
}

// Each context followed by the greedy token of the whole model (one rank, seed 11) after its
// last kSeq tokens (what evaluate_cloze keeps of a context before a one-token target).
std::vector<ClozeExample> greedy(int64_t vocab_multiple) {
  const GptConfig cfg = tiny(vocab_multiple);
  const Precision f64{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  engine::Stream s = engine::Stream::cpu();
  auto m = GptModel::create(cfg, {1, kSeq}, f64, 11);
  EXPECT_TRUE(m.ok()) << m.status();
  std::vector<int32_t> pos(kSeq), targets(kSeq, -1), pred(kSeq);
  for (int64_t j = 0; j < kSeq; ++j) pos[j] = static_cast<int32_t>(j);
  std::vector<ClozeExample> ex;
  for (const std::vector<int32_t>& c : contexts()) {
    const size_t keep = std::min<size_t>(c.size(), kSeq);
    std::vector<int32_t> in(kSeq, 0);
    std::copy(c.end() - keep, c.end(), in.begin());
    (*m)->forward(in.data(), pos.data(), targets.data(), false, 0, s);
    ops::row_argmax(
        {kSeq, cfg.vocab_size, cfg.padded()},
        engine::make_view(pred.data(), engine::DType::kI32, engine::Device::kCpu, {kSeq}),
        (*m)->last_logits(), s);
    ex.push_back({c, {pred[keep - 1]}});
  }
  return ex;
}

// Random two- and three-token targets (a count the single-rank run decides).
std::vector<ClozeExample> longer_targets() {
  std::vector<ClozeExample> ex;
  int i = 0;
  for (const std::vector<int32_t>& c : contexts()) {
    ex.push_back({c, testing::random_ints(2 + i % 2, 60 + i, 0, 29)});
    ++i;
  }
  return ex;
}

struct Results {
  LmEvalResult lm;
  ClozeResult greedy, every, longer;
};

// Null grid: one rank with the whole model.
Results run(int64_t vocab_multiple, const Layout& l, const parallel::ProcessGrid* grid,
            parallel::GroupComms* comms) {
  const GptConfig cfg = tiny(vocab_multiple);
  const Precision f64{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  GptShard sh;
  EvalParallel par;
  if (grid != nullptr) {
    const int stage = grid->pp_rank();
    sh.tp = l.tp;
    sh.tp_rank = grid->tp_rank();
    sh.tp_comm = l.tp > 1 ? comms->tp.get() : nullptr;
    const int64_t layers = cfg.n_layers / l.pp;
    sh.chunks = {{}};
    for (int64_t i = 0; i < layers; ++i) sh.chunks[0].push_back(stage * layers + i);
    sh.pre = stage == 0;
    sh.post = stage == l.pp - 1;
    par = eval_parallel(*grid, *comms, comms->pp.get());
  }
  engine::Stream s = engine::Stream::cpu();
  auto m = GptModel::create(cfg, {kBatch, kSeq}, f64, 11, sh);
  EXPECT_TRUE(m.ok()) << m.status();
  Results r;
  const std::vector<int32_t> tokens = testing::random_ints(63, 5, 0, 29);
  auto lm = evaluate_lm(**m, {kBatch, kSeq}, tokens, 3, /*pad=*/0, s, par);
  EXPECT_TRUE(lm.ok()) << lm.status();
  r.lm = *lm;
  auto own = evaluate_cloze(**m, {kBatch, kSeq}, greedy(vocab_multiple), 0, s, par);
  EXPECT_TRUE(own.ok()) << own.status();
  r.greedy = *own;
  auto every = evaluate_cloze(**m, {kBatch, kSeq}, every_token(), 0, s, par);
  EXPECT_TRUE(every.ok()) << every.status();
  r.every = *every;
  auto longer = evaluate_cloze(**m, {kBatch, kSeq}, longer_targets(), 0, s, par);
  EXPECT_TRUE(longer.ok()) << longer.status();
  r.longer = *longer;
  if (l.tp > 1 || l.pp > 1) {  // the same model without its communicators
    auto refused = evaluate_lm(**m, {kBatch, kSeq}, tokens, 3, 0, s, EvalParallel{});
    EXPECT_TRUE(absl::IsFailedPrecondition(refused.status())) << refused.status();
  }
  return r;
}

void expect_equal(const ClozeResult& got, const ClozeResult& want) {
  EXPECT_EQ(got.correct, want.correct);
  EXPECT_EQ(got.total, want.total);
  EXPECT_EQ(got.truncated, want.truncated);
  EXPECT_EQ(got.target_tokens, want.target_tokens);
  EXPECT_NEAR(got.target_loss_sum, want.target_loss_sum, 1e-12 * want.target_loss_sum);
}

TEST(EvalParallel, LayoutsEqualOneRank) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  std::vector<Layout> layouts;
  if (world == 2) layouts = {{2, 1, 1}, {1, 2, 1}, {1, 1, 2}};
  if (world == 4) layouts = {{2, 2, 1}, {2, 1, 2}, {1, 2, 2}};
  if (layouts.empty()) GTEST_SKIP() << "no parallel layout of " << world << " ranks";
  for (const Layout& l : layouts) {
    auto lc = parallel::testing::layout_comms(l.tp, l.pp, l.dp);
    ASSERT_TRUE(lc.ok()) << lc.status();
    for (int64_t multiple : {16, 128}) {
      SCOPED_TRACE(absl::StrFormat("%s, vocabulary padded to %d", l.name(), multiple));
      const Results ref = run(multiple, {1, 1, 1}, nullptr, nullptr);
      ASSERT_EQ(ref.lm.counted, 62);
      ASSERT_EQ(ref.lm.windows, 21);  // ceil((62 - 3) / 3) + 1: 11 micro-batches, the last of 1
      ASSERT_EQ(ref.greedy.correct, 5);
      ASSERT_EQ(ref.every.correct, 5);
      ASSERT_EQ(ref.every.total, 5 * 29);
      ASSERT_EQ(ref.every.truncated, 29);
      ASSERT_GT(ref.lm.loss_sum, 0.0);
      const Results got = run(multiple, l, &(*lc)->grid, &(*lc)->comms);
      EXPECT_EQ(got.lm.counted, ref.lm.counted);
      EXPECT_EQ(got.lm.windows, ref.lm.windows);
      EXPECT_NEAR(got.lm.loss_sum, ref.lm.loss_sum, 1e-12 * ref.lm.loss_sum);
      expect_equal(got.greedy, ref.greedy);
      expect_equal(got.every, ref.every);
      expect_equal(got.longer, ref.longer);
      if (rank == 0) {
        std::printf(
            "%s, padded %lld: lm loss sum %.9f, cloze %lld/%lld and %lld/%lld\n", l.name().c_str(),
            static_cast<long long>(multiple), got.lm.loss_sum,
            static_cast<long long>(got.every.correct), static_cast<long long>(got.every.total),
            static_cast<long long>(got.longer.correct), static_cast<long long>(got.longer.total));
      }
    }
  }
}

TEST(EvalParallel, GreedyTiesAndNanOverTheSlices) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (world != 2) GTEST_SKIP() << "runs with 2 ranks (TP2)";
  auto lc = parallel::testing::layout_comms(2, 1, 1);
  ASSERT_TRUE(lc.ok()) << lc.status();
  const std::vector<ClozeExample> ex = {{{5, 6}, {0}}, {{7}, {0}}, {{5, 6}, {16}}, {{7}, {1}}};
  for (bool tp : {false, true}) {
    SCOPED_TRACE(tp ? "tp2" : "one rank");
    const GptConfig cfg = tiny(16);  // padded 32: TP rank 1 holds tokens 16-28
    GptShard sh;
    if (tp) {
      sh.tp = 2;
      sh.tp_rank = (*lc)->grid.tp_rank();
      sh.tp_comm = (*lc)->comms.tp.get();
    }
    engine::Stream s = engine::Stream::cpu();
    auto m =
        GptModel::create(cfg, {kBatch, kSeq},
                         {engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64}, 11, sh);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const Param& p : (*m)->params().all()) engine::fill_zero(p.value, s);
    EvalParallel par;
    if (tp) par = eval_parallel((*lc)->grid, (*lc)->comms, nullptr);
    auto r = evaluate_cloze(**m, {kBatch, kSeq}, ex, 0, s, par);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->correct, 2);  // the two targets 0
    EXPECT_EQ(r->total, 4);
    // NaN logits (wte rows 9 and 20, the tied LM head: 0 * NaN) win, the first one (9) over
    // the other slice's (torch.argmax's rule); the contexts hold neither token.
    for (const Param& p : (*m)->params().all()) {
      if (p.name != "wte.weight") continue;
      const int64_t rows = p.value.shape[0], first = tp ? sh.tp_rank * rows : 0;
      for (int64_t row : {9, 20}) {
        if (row < first || row >= first + rows) continue;
        double* w = static_cast<double*>(p.value.data) + (row - first) * cfg.d_model;
        for (int64_t j = 0; j < cfg.d_model; ++j) w[j] = std::nan("");
      }
    }
    const std::vector<ClozeExample> nan_ex = {{{5, 6}, {9}}, {{7}, {9}}, {{7}, {20}}, {{7}, {0}}};
    auto n = evaluate_cloze(**m, {kBatch, kSeq}, nan_ex, 0, s, par);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(n->correct, 2);  // the two targets 9
  }
}

}  // namespace
}  // namespace anvil::model
