// ZeRO-1 against the unsharded update: shard arithmetic covers [0, n) exactly once with aligned
// boundaries; on 1/2/4 ranks, reduce_grads + grad_norm + step (AdamW on the own shard, then the
// all-gather) give every rank the parameters that one AdamW step over the summed gradients
// gives, and the same gradient norm. Every rank computes the reference itself (all ranks' local
// gradients are seeded by rank), without communication.
#include "parallel/zero.h"

#include <mpi.h>

#include <cmath>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;

TEST(ZeroShardTest, ShardsCoverTheBufferOnceWithAlignedBoundaries) {
  for (int64_t n : {0, 1, 63, 64, 1000, 4096, 12345}) {
    for (int dp : {1, 2, 3, 4, 8}) {
      int64_t next = 0;
      for (int r = 0; r < dp; ++r) {
        const ZeroShard z = zero_shard(n, dp, r);
        EXPECT_EQ(z.begin, next) << n << " " << dp << " " << r;
        EXPECT_EQ(z.begin % kZeroAlign, 0);
        EXPECT_GE(z.numel(), 0);
        if (r < dp - 1) {
          EXPECT_EQ(z.numel(), zero_prefix(n, dp) / dp);
        }
        next = z.end;
      }
      EXPECT_EQ(next, n);
      EXPECT_EQ(zero_prefix(n, dp) % (dp * kZeroAlign), 0);
      EXPECT_LT(n - zero_prefix(n, dp), dp * kZeroAlign);
    }
  }
  EXPECT_EQ(zero_shard(1000, 2, 0).end, 448);  // prefix 896 = 2 * 448
  EXPECT_EQ(zero_shard(1000, 2, 1).end, 1000);
}

TEST(Zero1OptimizerTest, StepEqualsTheUnshardedAdamW) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto grid = ProcessGrid::create(world, rank, 1, 1);
  ASSERT_TRUE(grid.ok());
  auto comm = MpiComm::create(MPI_COMM_WORLD, grid->dp_group(), rank, CommOptions{});
  ASSERT_TRUE(comm.ok());

  const int64_t n = 1000, decay_end = 448;  // a tail beyond the even prefix on 2 and 4 ranks
  const std::vector<float> init = testing::random_uniform(n, 11);
  std::vector<std::vector<float>> local(world);
  for (int r = 0; r < world; ++r) local[r] = testing::random_uniform(n, 100 + r, -0.1f, 0.1f);
  ops::AdamWArgs args;
  args.lr = 1e-2f;
  args.beta1 = 0.9f;
  args.beta2 = 0.95f;
  args.eps = 1e-8f;
  args.weight_decay = 0.1f;
  args.grad_scale = 0.5f;

  // Reference: summed gradients, two full AdamW steps (decay on [0, decay_end)).
  engine::Stream s = engine::Stream::cpu();
  std::vector<float> ref = init, rm(n, 0.0f), rv(n, 0.0f), rg(n, 0.0f);
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) rg[i] += local[r][i];
  }
  double ref_norm_sq = 0.0;
  for (float g : rg) ref_norm_sq += static_cast<double>(g) * g;
  auto cpu = [](std::vector<float>& v, int64_t b, int64_t e) {
    return engine::make_view(v.data() + b, DType::kF32, Device::kCpu, {e - b});
  };
  for (int64_t t = 1; t <= 2; ++t) {
    ops::AdamWArgs a = args;
    a.step = t;
    ops::adamw_update(a, cpu(ref, 0, decay_end), cpu(rm, 0, decay_end), cpu(rv, 0, decay_end), {},
                      cpu(rg, 0, decay_end), s);
    a.weight_decay = 0.0f;
    ops::adamw_update(a, cpu(ref, decay_end, n), cpu(rm, decay_end, n), cpu(rv, decay_end, n), {},
                      cpu(rg, decay_end, n), s);
  }

  // ZeRO-1: master == value (CPU f32), this rank's gradients only.
  std::vector<float> p = init, m(n, 0.0f), v(n, 0.0f), g;
  ZeroBuffers b;
  b.value = b.master = cpu(p, 0, n);
  b.m = cpu(m, 0, n);
  b.v = cpu(v, 0, n);
  b.decay_end = decay_end;
  double norm = 0.0;
  for (int64_t t = 1; t <= 2; ++t) {
    g = local[rank];  // the backward's local gradient, fresh each step
    b.grad = cpu(g, 0, n);
    auto z = Zero1Optimizer::create(b, comm->get());
    ASSERT_TRUE(z.ok()) << z.status();
    (*z)->reduce_grads(s);
    norm = (*z)->grad_norm(s);
    ops::AdamWArgs a = args;
    a.step = t;
    (*z)->step(a, s);
  }
  EXPECT_NEAR(norm, std::sqrt(ref_norm_sq), 1e-6 * std::sqrt(ref_norm_sq));
  // f32 rounding: the gradient sums run in another order (at most 4 terms), AdamW divides by
  // sqrt(v): a relative 1e-6 on values of size ~1 plus lr-scaled noise.
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref[i], 1e-5f) << i;
  // The moments of the own shard match; outside it they stay untouched (zero).
  const ZeroShard own = zero_shard(n, world, rank);
  for (int64_t i = 0; i < n; ++i) {
    if (i >= own.begin && i < own.end) {
      ASSERT_NEAR(m[i], rm[i], 1e-6f) << i;
    } else {
      ASSERT_EQ(m[i], 0.0f) << i;
    }
  }
}

}  // namespace
}  // namespace anvil::parallel
