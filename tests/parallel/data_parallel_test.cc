// DataParallel building blocks: bucket planning, Megatron's sample assignment across DP ranks,
// and the bucketed all-reduce of a flat gradient buffer plus the scalar sum on MpiComm.
// (The trainer-level equivalence DP == one rank is in dp_training_test.cc.)
#include "parallel/data_parallel.h"

#include <mpi.h>

#include <set>
#include <vector>

#include "engine/status.h"
#include "gtest/gtest.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;

TEST(PlanBucketsTest, SizesAndAlignment) {
  auto b = plan_buckets(1000, 300, 64);  // 300 -> 256 (aligned down to 64)
  ASSERT_EQ(b.size(), 4u);
  EXPECT_EQ(b[0].begin, 0);
  EXPECT_EQ(b[0].end, 256);
  EXPECT_EQ(b[1].begin, 256);
  EXPECT_EQ(b[3].begin, 768);
  EXPECT_EQ(b[3].end, 1000);
  b = plan_buckets(1000, 0, 64);  // one bucket
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].numel(), 1000);
  b = plan_buckets(100, 10, 64);  // smaller than the alignment: one alignment unit per bucket
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].numel(), 64);
  EXPECT_EQ(b[1].numel(), 36);
  EXPECT_TRUE(plan_buckets(0, 10, 64).empty());
}

// Every sample of a step is used exactly once over (rank, micro-batch, row); DP rank r's
// micro-batch m is the single-rank micro-batch m*dp + r.
TEST(DpSampleIndexTest, MegatronOrder) {
  const int64_t G = 24, B = 3;
  for (int dp : {1, 2, 4, 8}) {
    const int64_t accum = G / (B * dp);
    std::set<int64_t> seen;
    for (int r = 0; r < dp; ++r) {
      for (int64_t m = 0; m < accum; ++m) {
        for (int64_t b = 0; b < B; ++b) {
          const int64_t i = dp_sample_index(/*step=*/2, G, B, dp, r, m, b);
          EXPECT_TRUE(seen.insert(i).second) << i;
          EXPECT_EQ(i, dp_sample_index(2, G, B, 1, 0, m * dp + r, b));
        }
      }
    }
    EXPECT_EQ(seen.size(), static_cast<size_t>(G));
    EXPECT_EQ(*seen.begin(), 2 * G);
    EXPECT_EQ(*seen.rbegin(), 3 * G - 1);
  }
  // Megatron: in each chunk of B*dp samples, rank r takes [r*B, (r+1)*B).
  EXPECT_EQ(dp_sample_index(0, 16, 2, 4, /*rank=*/1, /*m=*/1, /*b=*/0), 8 + 2);
}

TEST(DataParallelTest, BucketedAllReduceSumsTheFlatBuffer) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto grid = ProcessGrid::create(world, rank, 1, 1);
  ASSERT_TRUE(grid.ok());
  auto comm = MpiComm::create(MPI_COMM_WORLD, grid->dp_group(), rank, CommOptions{});
  ASSERT_TRUE(comm.ok());

  const int64_t n = 1000;  // not a multiple of the bucket size
  std::vector<float> g(n);
  for (int64_t i = 0; i < n; ++i) g[i] = static_cast<float>((rank + 1) * (i % 7 + 1));
  DataParallelOptions opt;
  opt.bucket_elems = 128;
  auto dp = DataParallel::create(engine::make_view(g.data(), DType::kF32, Device::kCpu, {n}),
                                 comm->get(), opt);
  ASSERT_TRUE(dp.ok()) << dp.status();
  EXPECT_EQ((*dp)->buckets().size(), 8u);
  EXPECT_EQ((*dp)->size(), world);
  EXPECT_EQ((*dp)->rank(), rank);
  engine::Stream s = engine::Stream::cpu();
  (*dp)->start_grad_sync(s);
  (*dp)->finish_grad_sync(s);
  const double total = (*dp)->sum(rank + 0.5, s);

  const float rank_sum = static_cast<float>(world * (world + 1) / 2);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(g[i], rank_sum * static_cast<float>(i % 7 + 1)) << i;
  EXPECT_EQ(total, world * (world - 1) / 2.0 + 0.5 * world);
}

TEST(DataParallelTest, RejectsMismatchedBuffers) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto grid = ProcessGrid::create(world, rank, 1, 1);
  auto comm = MpiComm::create(MPI_COMM_WORLD, grid->dp_group(), rank, CommOptions{});
  ASSERT_TRUE(comm.ok());
  std::vector<uint16_t> bf(64);
  auto dp = DataParallel::create(engine::make_view(bf.data(), DType::kBF16, Device::kCpu, {64}),
                                 comm->get(), DataParallelOptions{});
  EXPECT_FALSE(dp.ok());
  EXPECT_FALSE(DataParallel::create({}, nullptr, DataParallelOptions{}).ok());
}

}  // namespace
}  // namespace anvil::parallel
