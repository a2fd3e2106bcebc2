// Tests of the LM head block (model/blocks/lm_head.h) on the CPU in double.
//  - Gradients: with an input scale and an ignored target, the gradients of
//    L = grad_scale * sum_r loss_r with respect to x and W against central finite differences
//    (dW +=, dx =); the padding columns of the logits get no gradient; the check fails for a
//    backward that forgets the input scale.
//  - Vocab-parallel over 2 forked ranks (TcpComm): each rank's losses equal the one-rank
//    losses, its dW is its rows of the one-rank dW, and the ranks' dx sum to the one-rank dx.
//  - The saved-activation plan: names and shapes.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/blocks/lm_head.h"
#include "parallel/grid.h"
#include "parallel/tcp_comm.h"
#include "parallel/tcp_store.h"
#include "tests/testing/fork_ranks.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

constexpr int64_t kRows = 4, kD = 3, kVocab = 5, kPadded = 8;
const std::vector<int32_t> kTargets = {4, -1, 0, 2};
constexpr float kScale = 0.6f, kGradScale = 0.25f;

LmHeadConfig config(int64_t tp = 1, int64_t rank = 0) {
  LmHeadConfig c;
  c.rows = kRows;
  c.d_model = kD;
  c.vocab = kVocab;
  c.padded_vocab = kPadded;
  c.tp = tp;
  c.tp_rank = rank;
  c.input_scale = kScale;
  return c;
}

std::vector<double> random(int64_t n, uint64_t seed) {
  const std::vector<float> v = testing::random_uniform(n, seed, -1.0f, 1.0f);
  return {v.begin(), v.end()};
}

struct Result {
  std::vector<double> losses, dx, dw;
};

// Forward, training loss and backward of one rank's slice w [padded / tp, d].
Result run(TensorPool& pool, TestStream& s, const LmHeadConfig& c, const std::vector<double>& x,
           const std::vector<double>& w, parallel::Comm* comm, double g0 = 0.0) {
  const int64_t cols = c.local_cols();
  const TensorView xv = pool.from_f64(x, {kRows, kD}), wv = pool.from_f64(w, {cols, kD});
  const TensorView logits = pool.empty(DType::kF64, {kRows, cols});
  const TensorView losses = pool.empty(DType::kF64, {kRows});
  const TensorView ce = pool.empty(DType::kF64, {3 * kRows});
  lm_head_forward(c, logits, xv, wv, s);
  lm_head_loss(c, losses, logits, pool.from_i32(kTargets, {kRows}), {}, /*train=*/true, ce, comm,
               s);
  const TensorView dx = pool.empty(DType::kF64, {kRows, kD});
  const TensorView dw = pool.from_f64(std::vector<double>(w.size(), g0), {cols, kD});
  lm_head_backward(c, dx, dw, logits, xv, wv, kGradScale, s);
  std::vector<double> got_dw = testing::to_host_f64(dw);
  for (double& v : got_dw) v -= g0;
  return {testing::to_host_f64(losses), testing::to_host_f64(dx), got_dw};
}

double total_loss(TensorPool& pool, TestStream& s, const LmHeadConfig& c,
                  const std::vector<double>& x, const std::vector<double>& w) {
  const TensorView logits = pool.empty(DType::kF64, {kRows, kPadded});
  const TensorView losses = pool.empty(DType::kF64, {kRows});
  lm_head_forward(c, logits, pool.from_f64(x, {kRows, kD}), pool.from_f64(w, {kPadded, kD}), s);
  lm_head_loss(c, losses, logits, pool.from_i32(kTargets, {kRows}), {}, /*train=*/false, {},
               nullptr, s);
  double sum = 0.0;
  for (double l : testing::to_host_f64(losses)) sum += l;
  return kGradScale * sum;
}

TEST(LmHeadBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> x = random(kRows * kD, 1), w = random(kPadded * kD, 2);
  const double g0 = 0.5;
  const Result got = run(pool, stream, config(), x, w, nullptr, g0);
  const std::vector<double> num_x = testing::numeric_gradient(
      [&](const std::vector<double>& v) { return total_loss(pool, stream, config(), v, w); }, x);
  const std::vector<double> num_w = testing::numeric_gradient(
      [&](const std::vector<double>& v) { return total_loss(pool, stream, config(), x, v); }, w);
  EXPECT_TRUE(testing::tensors_near(got.dx, num_x, Tol{1e-8, 1e-7}));
  EXPECT_TRUE(testing::tensors_near(got.dw, num_w, Tol{1e-8, 1e-7}));
  for (int64_t i = kVocab * kD; i < kPadded * kD; ++i) EXPECT_EQ(got.dw[i], 0.0) << i;
  // The check can fail: a backward without the input scale.
  LmHeadConfig unscaled = config();
  unscaled.input_scale = 1.0f;
  const TensorView logits = pool.empty(DType::kF64, {kRows, kPadded});
  const TensorView xv = pool.from_f64(x, {kRows, kD}), wv = pool.from_f64(w, {kPadded, kD});
  lm_head_forward(config(), logits, xv, wv, stream);
  lm_head_loss(config(), pool.empty(DType::kF64, {kRows}), logits, pool.from_i32(kTargets, {kRows}),
               {}, true, {}, nullptr, stream);
  const TensorView dx = pool.empty(DType::kF64, {kRows, kD});
  lm_head_backward(unscaled, dx, pool.empty(DType::kF64, {kPadded, kD}), logits, xv, wv, kGradScale,
                   stream);
  EXPECT_FALSE(testing::tensors_near(testing::to_host_f64(dx), num_x, Tol{1e-8, 1e-7}));
}

TEST(LmHeadBlock, VocabParallelRanksMatchOneRank) {
  const int world = 2, port = testing::free_tcp_port();
  testing::expect_all_ranks_passed(testing::run_forked_ranks(world, 120.0, [&](int rank) {
    auto store = parallel::TcpStore::create("127.0.0.1", port, rank, world, 30.0);
    ASSERT_TRUE(store.ok()) << store.status();
    auto grid = parallel::ProcessGrid::create(world, rank, 1, 1);
    ASSERT_TRUE(grid.ok()) << grid.status();
    auto comm = parallel::TcpComm::create(grid->world_group(), rank, store->get(), {});
    ASSERT_TRUE(comm.ok()) << comm.status();
    TestStream stream(Device::kCpu);
    TensorPool pool(Device::kCpu);
    const std::vector<double> x = random(kRows * kD, 3), w = random(kPadded * kD, 4);
    const Result one = run(pool, stream, config(), x, w, nullptr);
    const int64_t cols = kPadded / world;
    const std::vector<double> mine(w.begin() + rank * cols * kD,
                                   w.begin() + (rank + 1) * cols * kD);
    const Result part = run(pool, stream, config(world, rank), x, mine, comm->get());
    const Tol tol{1e-12, 1e-10};
    EXPECT_TRUE(testing::tensors_near(part.losses, one.losses, tol));
    EXPECT_TRUE(testing::tensors_near(
        part.dw, {one.dw.begin() + rank * cols * kD, one.dw.begin() + (rank + 1) * cols * kD}, tol,
        /*allow_zero_ref=*/true));
    std::vector<double> dx = part.dx;
    (*comm)->all_reduce(engine::make_view(dx.data(), DType::kF64, Device::kCpu, {kRows * kD}),
                        parallel::ReduceOp::kSum, stream);
    EXPECT_TRUE(testing::tensors_near(dx, one.dx, tol));
  }));
}

TEST(LmHeadBlock, SavedActivationPlan) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  auto take = [&](const std::string& n, DType, const std::vector<int64_t>& shape) {
    names.push_back(n);
    shapes.push_back(shape);
    return TensorView{};
  };
  lm_head_saved_acts(config(2, 1), DType::kBF16, DType::kF32, "head.", take);
  EXPECT_EQ(names, (std::vector<std::string>{"head.logits", "head.losses"}));
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{kRows, kPadded / 2}, {kRows}}));
}

}  // namespace
}  // namespace anvil::model::blocks
