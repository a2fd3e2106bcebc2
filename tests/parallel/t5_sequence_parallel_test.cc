// T5 sequence parallelism and activation recomputation on the CPU under mpirun (np 1, 2, 4),
// with TP over the whole world (np 1: neither TP nor sequence parallelism).
//  - Sequence parallelism on vs off at the same TP, dropout on (v1.0 and v1.1, encoder padding,
//    f64): the dropouts on this rank's rows are numbered as on one rank, so over 3 AdamW steps
//    the losses, gradient norms and every gradient and parameter agree to 1e-10 relative (only
//    summation orders differ: RMSNorm gradients are summed over the ranks' rows).
//  - Recomputation (full, selective) vs none, same TP and sequence parallelism, dropout on, f32,
//    two micro-batches accumulated: the same dropout masks and the same arithmetic, so the
//    losses and the whole gradient buffer are bitwise equal.
//  - The memory plan: full recomputation needs fewer activation bytes (one layer's set per
//    stack instead of every layer's); selective equals none (flash attention keeps only lse).
#include <mpi.h>

#include <algorithm>
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

using testing_t5::Batch;
using testing_t5::World;

T5Config tiny_config(T5Version v) { return testing_t5::tiny_config(v, 0.1f, 2, 3); }

// B*Te = 16 and B*Td = 12 rows: divisible by tp 1, 2, 4.
constexpr T5RunShape kShape{2, 8, 6};

Batch make_batch(uint64_t seed) { return testing_t5::make_batch(kShape, seed, {8, 5}); }

// The whole world as one TP group.
World make_world() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return testing_t5::make_world(size, 1, 1);
}

T5Shard make_shard(const World& w, bool sp, Recompute r) {
  T5Shard shard;
  shard.tp = w.size;
  shard.tp_rank = w.rank;
  shard.tp_comm = w.comms->tp.get();
  shard.sequence_parallel = sp;
  shard.recompute = r;
  return shard;
}

// Forward and backward of `micro` micro-batches, gradients accumulated, then the TP sums of
// finish_backward; returns the summed losses.
double accumulate(T5Model& m, int micro, uint64_t first, engine::Stream& s) {
  m.zero_grads(s);
  double loss = 0.0;
  for (int k = 0; k < micro; ++k) {
    const Batch b = make_batch(first + 10 * static_cast<uint64_t>(k));
    m.forward(b.view(), true, first + static_cast<uint64_t>(k), s);
    loss += m.loss_sum(s);
    m.backward(static_cast<float>(1.0 / static_cast<double>(b.counted)), s);
  }
  m.finish_backward(s);
  return loss;
}

std::vector<double> host(engine::ConstTensorView v) { return testing::to_host_f64(v); }

void check_sp_equals_no_sp(T5Version v) {
  World w = make_world();
  engine::Stream s = engine::Stream::cpu();
  const Precision f64{engine::Device::kCpu, DType::kF64, DType::kF64};
  const T5Config cfg = tiny_config(v);
  auto off = T5Model::create(cfg, kShape, f64, 7, make_shard(w, false, Recompute::kNone));
  auto on = T5Model::create(cfg, kShape, f64, 7, make_shard(w, true, Recompute::kNone));
  ASSERT_TRUE(off.ok()) << off.status();
  ASSERT_TRUE(on.ok()) << on.status();
  for (int k = 1; k <= 3; ++k) {
    const double loss_off = accumulate(**off, 2, 100 * static_cast<uint64_t>(k), s);
    const double loss_on = accumulate(**on, 2, 100 * static_cast<uint64_t>(k), s);
    EXPECT_NEAR(loss_on, loss_off, 1e-10 * loss_off) << "step " << k;
    const double n_off = (*off)->grad_norm(s), n_on = (*on)->grad_norm(s);
    EXPECT_GT(n_off, 0.0);
    EXPECT_NEAR(n_on, n_off, 1e-10 * n_off) << "step " << k;
    EXPECT_TRUE(testing::tensors_near(host((*on)->flat_buffers().grad),
                                      host((*off)->flat_buffers().grad), {1e-10, 1e-9, 1e-18},
                                      true))
        << "step " << k;
    const OptimizerStep o{1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, 1.0f, k};
    (*off)->optimizer_step(o, s);
    (*on)->optimizer_step(o, s);
  }
  EXPECT_TRUE(testing::tensors_near(host((*on)->flat_buffers().value),
                                    host((*off)->flat_buffers().value), {1e-10, 1e-9, 1e-18},
                                    true));
}

TEST(T5SequenceParallel, V10EqualsWithout) { check_sp_equals_no_sp(T5Version::kV1_0); }
TEST(T5SequenceParallel, V11EqualsWithout) { check_sp_equals_no_sp(T5Version::kV1_1); }

void check_recompute_bitwise(Recompute r, bool sp) {
  World w = make_world();
  engine::Stream s = engine::Stream::cpu();
  const Precision f32{engine::Device::kCpu, DType::kF32, DType::kF32};
  const T5Config cfg = tiny_config(T5Version::kV1_1);
  auto plain = T5Model::create(cfg, kShape, f32, 9, make_shard(w, sp, Recompute::kNone));
  auto re = T5Model::create(cfg, kShape, f32, 9, make_shard(w, sp, r));
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(re.ok()) << re.status();
  for (int k = 1; k <= 2; ++k) {
    const double loss_plain = accumulate(**plain, 2, 50 * static_cast<uint64_t>(k), s);
    const double loss_re = accumulate(**re, 2, 50 * static_cast<uint64_t>(k), s);
    EXPECT_EQ(loss_re, loss_plain) << "step " << k;
    const std::vector<double> g_plain = host((*plain)->flat_buffers().grad);
    EXPECT_EQ(host((*re)->flat_buffers().grad), g_plain) << "step " << k;
    double most = 0.0;
    for (double g : g_plain) most = std::max(most, std::abs(g));
    EXPECT_GT(most, 0.0);
    const OptimizerStep o{1e-2f, 0.9f, 0.99f, 1e-8f, 0.1f, 1.0f, k};
    (*plain)->optimizer_step(o, s);
    (*re)->optimizer_step(o, s);
  }
}

TEST(T5Recompute, FullBitwiseEqualsNone) { check_recompute_bitwise(Recompute::kFull, false); }
TEST(T5Recompute, SelectiveBitwiseEqualsNone) {
  check_recompute_bitwise(Recompute::kSelective, false);
}
TEST(T5Recompute, FullWithSequenceParallelBitwiseEqualsNone) {
  check_recompute_bitwise(Recompute::kFull, true);
}

TEST(T5Recompute, FullShrinksActivationPlan) {
  const Precision f32{engine::Device::kCpu, DType::kF32, DType::kF32};
  T5Config cfg = tiny_config(T5Version::kV1_0);
  cfg.n_encoder_layers = cfg.n_decoder_layers = 6;
  auto bytes = [&](Recompute r) {
    T5Shard shard;
    shard.recompute = r;
    auto plan = T5Model::plan(cfg, kShape, f32, shard);
    EXPECT_TRUE(plan.ok()) << plan.status();
    return plan->category_bytes("activations");
  };
  const size_t none = bytes(Recompute::kNone), full = bytes(Recompute::kFull);
  EXPECT_EQ(bytes(Recompute::kSelective), none);
  // 12 layers' sets become 12 inputs plus one set per stack: well under half.
  EXPECT_LT(2 * full, none) << full << " vs " << none;
}

TEST(T5SequenceParallel, IndivisibleRowsAreAConfigError) {
  T5Shard shard;
  shard.tp = 4;
  shard.sequence_parallel = true;
  const Precision f32{engine::Device::kCpu, DType::kF32, DType::kF32};
  auto plan = T5Model::plan(tiny_config(T5Version::kV1_0), {1, 8, 6}, f32, shard);
  ASSERT_FALSE(plan.ok());
  EXPECT_NE(std::string(plan.status().message()).find("decoder_seq_len (6)"), std::string::npos)
      << plan.status();
}

}  // namespace
}  // namespace anvil::model
