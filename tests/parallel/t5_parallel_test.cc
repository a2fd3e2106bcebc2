// T5 tensor and data parallelism on the CPU under mpirun (np 1, 2, 4), in double: every rank
// also builds the single-rank reference (no communication) from the same seed.
//  - TP over the whole world (v1.0 and v1.1, encoder padding, dropout off: the FFN-hidden masks
//    are numbered per TP slice, see model/t5/t5.h): the initial
//    parameters equal the reference's at the same global elements (model/param_table.h
//    tp_global_index), and over 3 AdamW steps on a fixed batch the losses, gradient norms,
//    every parameter's gradient and the updated parameters equal the reference's to 1e-10.
//  - DP over the whole world: each rank runs its micro-batch of a global batch of one per rank,
//    sums the gradients over DP (grad_scale 1 / counted tokens of the whole batch); equal to the
//    reference accumulating all micro-batches on one rank (dropout on, numbered by micro-batch).
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/t5/t5.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/mpi_comm.h"
#include "tests/parallel/t5_testing.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;
using engine::TensorView;

using testing_t5::Batch;
using testing_t5::World;

T5Config tiny_config(T5Version v, float dropout) {
  return testing_t5::tiny_config(v, dropout, 2, 2);
}

constexpr T5RunShape kShape{2, 7, 5};

Batch make_batch(uint64_t seed) { return testing_t5::make_batch(kShape, seed, {7, 5}); }

// The whole world as one TP group (tp) or one DP group.
World make_world(bool tp) {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return tp ? testing_t5::make_world(size, 1, 1) : testing_t5::make_world(1, 1, size);
}

const Precision kF64{engine::Device::kCpu, DType::kF64, DType::kF64};

// The reference element of each of p's local elements.
std::vector<double> reference_elements(const Param& p, const Param& ref, int tp, int rank,
                                       TensorView Param::*field) {
  const std::vector<double> whole = testing::to_host_f64(ref.*field);
  std::vector<double> out;
  for (int64_t i = 0; i < p.numel(); ++i) {
    out.push_back(whole[static_cast<size_t>(tp_global_index(p, i, tp, rank))]);
  }
  return out;
}

void expect_params_equal(T5Model& m, T5Model& ref, int tp, int rank, TensorView Param::*field,
                         const char* what) {
  for (const Param& p : m.params().all()) {
    const Param* r = ref.params().find(p.name);
    ASSERT_NE(r, nullptr) << p.name;
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(p.*field),
                                      reference_elements(p, *r, tp, rank, field),
                                      {1e-10, 1e-9, 1e-18}, true))
        << what << " " << p.name;
  }
}

double step(T5Model& m, const Batch& b, int64_t n, engine::Stream& s) {
  m.zero_grads(s);
  m.forward(b.view(), true, static_cast<uint64_t>(n), s);
  const double loss = m.loss_sum(s) / static_cast<double>(b.counted);
  m.backward(static_cast<float>(1.0 / static_cast<double>(b.counted)), s);
  return loss;
}

void check_tp(T5Version v) {
  World w = make_world(true);
  if (tiny_config(v, 0).n_heads % w.size != 0) GTEST_SKIP() << "heads not divisible by world";
  engine::Stream s = engine::Stream::cpu();
  // No dropout: the d_ff-hidden masks differ by construction under TP.
  T5Config cfg = tiny_config(v, 0.0f);
  T5Shard shard;
  shard.tp = w.size;
  shard.tp_rank = w.rank;
  shard.tp_comm = w.comms->tp.get();
  auto ref = T5Model::create(cfg, kShape, kF64, 3);
  auto tp = T5Model::create(cfg, kShape, kF64, 3, shard);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(tp.ok()) << tp.status();
  expect_params_equal(**tp, **ref, w.size, w.rank, &Param::value, "initial");
  const Batch b = make_batch(11);
  for (int k = 1; k <= 3; ++k) {
    const double lr = step(**ref, b, k, s), lt = step(**tp, b, k, s);
    EXPECT_NEAR(lt, lr, 1e-10 * lr) << "step " << k;
    const double nr = (*ref)->grad_norm(s), nt = (*tp)->grad_norm(s);
    EXPECT_GT(nr, 0.0);
    EXPECT_NEAR(nt, nr, 1e-10 * nr) << "step " << k;
    expect_params_equal(**tp, **ref, w.size, w.rank, &Param::grad, "grad");
    const OptimizerStep o{1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, 1.0f, k};
    (*ref)->optimizer_step(o, s);
    (*tp)->optimizer_step(o, s);
  }
  expect_params_equal(**tp, **ref, w.size, w.rank, &Param::value, "after 3 steps");
}

TEST(T5Parallel, TensorParallelV10EqualsSingleRank) { check_tp(T5Version::kV1_0); }
TEST(T5Parallel, TensorParallelV11EqualsSingleRank) { check_tp(T5Version::kV1_1); }

TEST(T5Parallel, DataParallelEqualsAccumulation) {
  World w = make_world(false);
  engine::Stream s = engine::Stream::cpu();
  const T5Config cfg = tiny_config(T5Version::kV1_1, 0.1f);
  auto ref = T5Model::create(cfg, kShape, kF64, 3);
  auto dp = T5Model::create(cfg, kShape, kF64, 3);
  ASSERT_TRUE(ref.ok()) << ref.status();
  ASSERT_TRUE(dp.ok()) << dp.status();
  std::vector<Batch> batches;
  int64_t counted = 0;
  for (int r = 0; r < w.size; ++r) {
    batches.push_back(make_batch(100 + 7 * static_cast<uint64_t>(r)));
    counted += batches.back().counted;
  }
  const float scale = static_cast<float>(1.0 / static_cast<double>(counted));
  // Reference: every micro-batch on one rank (dropout offset = micro-batch number).
  (*ref)->zero_grads(s);
  double loss_ref = 0;
  for (int r = 0; r < w.size; ++r) {
    (*ref)->forward(batches[static_cast<size_t>(r)].view(), true, static_cast<uint64_t>(r), s);
    loss_ref += (*ref)->loss_sum(s);
    (*ref)->backward(scale, s);
  }
  // DP: this rank's micro-batch, then the sums over DP.
  (*dp)->zero_grads(s);
  (*dp)->forward(batches[static_cast<size_t>(w.rank)].view(), true, static_cast<uint64_t>(w.rank),
                 s);
  double loss = (*dp)->loss_sum(s);
  (*dp)->backward(scale, s);
  if (w.size > 1) {
    w.comms->dp->all_reduce((*dp)->flat_buffers().grad, parallel::ReduceOp::kSum, s);
  }
  MPI_Allreduce(MPI_IN_PLACE, &loss, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  EXPECT_NEAR(loss, loss_ref, 1e-10 * loss_ref);
  expect_params_equal(**dp, **ref, 1, 0, &Param::grad, "dp grad");
}

}  // namespace
}  // namespace anvil::model
