// ZeRO's bucket partition and collectives against the unsharded computation: the pieces of
// every rank tile each bucket exactly once at shard offsets b.begin / dp; on 1/2/4 ranks the
// per-bucket reduce-scatter gives each owner the sum over ranks of its piece, the all-gather
// hands every rank every piece, and the sharded AdamW (decay ranges per bucket) over whole or
// shard buffers equals one AdamW step over the summed gradients. Every rank computes the
// reference itself (the ranks' local gradients are seeded by rank), without communication.
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

// Three buckets with decay prefixes, each a multiple of dp * 64 for dp in {1, 2, 4}.
std::vector<ZeroBucket> test_buckets() {
  return {{0, 256, 512}, {512, 512 + 768, 512 + 1024}, {1536, 1536, 1536 + 256}};
}

TEST(ZeroPartitionTest, PiecesTileEveryBucketOnce) {
  for (int dp : {1, 2, 4}) {
    for (size_t b = 0; b < test_buckets().size(); ++b) {
      const ZeroBucket k = test_buckets()[b];
      int64_t next = k.begin;
      for (int r = 0; r < dp; ++r) {
        auto part = ZeroPartition::create(test_buckets(), dp, r);
        ASSERT_TRUE(part.ok()) << part.status();
        const ZeroPiece p = part->piece(b);
        EXPECT_EQ(p.begin, next);
        EXPECT_EQ(p.numel(), k.numel() / dp);
        EXPECT_EQ(p.shard_offset, k.begin / dp);
        EXPECT_EQ(p.begin % kZeroAlign, 0);
        EXPECT_EQ(p.decay_end, std::min(std::max(k.decay_end, p.begin), p.end));
        next = p.end;
        EXPECT_EQ(part->shard_numel() * dp, part->numel());
      }
      EXPECT_EQ(next, k.end);
    }
  }
  // A bucket that does not split evenly, a gap, a bad rank.
  EXPECT_FALSE(ZeroPartition::create({{0, 0, 100}}, 2, 0).ok());
  EXPECT_FALSE(ZeroPartition::create({{0, 0, 128}, {256, 256, 384}}, 2, 0).ok());
  EXPECT_FALSE(ZeroPartition::create(test_buckets(), 2, 2).ok());
  EXPECT_EQ(zero_bucket_align(1, 4), 256);
  EXPECT_EQ(zero_bucket_align(257, 2), 384);
}

TEST(ZeroCollectivesTest, ReduceScatterAllGatherAdamWEqualTheUnshardedStep) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto grid = ProcessGrid::create(world, rank, 1, 1);
  ASSERT_TRUE(grid.ok());
  auto comm = MpiComm::create(MPI_COMM_WORLD, grid->dp_group(), rank, CommOptions{});
  ASSERT_TRUE(comm.ok());
  auto part = ZeroPartition::create(test_buckets(), world, rank);
  ASSERT_TRUE(part.ok()) << part.status();
  const int64_t n = part->numel(), ns = part->shard_numel();
  engine::Stream s = engine::Stream::cpu();
  auto cpu = [](std::vector<float>& v) {
    return engine::make_view(v.data(), DType::kF32, Device::kCpu, {static_cast<int64_t>(v.size())});
  };

  std::vector<std::vector<float>> local(world);
  for (int r = 0; r < world; ++r) local[r] = testing::random_uniform(n, 100 + r, -0.1f, 0.1f);
  std::vector<float> sum(n, 0.0f);
  for (int r = 0; r < world; ++r) {
    for (int64_t i = 0; i < n; ++i) sum[i] += local[r][i];
  }
  // Reduce-scatter, bucket by bucket, into the shard.
  std::vector<float> grad = local[rank], shard(ns, -1.0f);
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const ZeroBucket& k = part->buckets()[b];
    zero_reduce_scatter(**comm, *part, b, cpu(shard), engine::slice_rows(cpu(grad), k.begin, k.end),
                        s);
  }
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const ZeroPiece p = part->piece(b);
    for (int64_t i = 0; i < p.numel(); ++i) {
      ASSERT_NEAR(shard[p.shard_offset + i], sum[p.begin + i], 1e-6f) << b << " " << i;
    }
  }

  // AdamW on the own pieces (master == value, moments as shards), then the all-gather.
  ops::AdamWArgs args;
  args.lr = 1e-2f;
  args.beta1 = 0.9f;
  args.beta2 = 0.95f;
  args.eps = 1e-8f;
  args.weight_decay = 0.1f;
  args.grad_scale = 0.5f;
  args.step = 1;
  const std::vector<float> init = testing::random_uniform(n, 11);
  std::vector<float> ref = init, rm(n, 0.0f), rv(n, 0.0f);
  for (const ZeroBucket& k : part->buckets()) {
    auto sl = [&](std::vector<float>& v, int64_t b, int64_t e) {
      return engine::slice_rows(cpu(v), b, e);
    };
    ops::AdamWArgs a = args;
    ops::adamw_update(a, sl(ref, k.begin, k.decay_end), sl(rm, k.begin, k.decay_end),
                      sl(rv, k.begin, k.decay_end), {}, sl(sum, k.begin, k.decay_end), s);
    a.weight_decay = 0.0f;
    ops::adamw_update(a, sl(ref, k.decay_end, k.end), sl(rm, k.decay_end, k.end),
                      sl(rv, k.decay_end, k.end), {}, sl(sum, k.decay_end, k.end), s);
  }
  std::vector<float> p = init, m(ns, 0.0f), v(ns, 0.0f);
  zero_adamw(*part, args, cpu(p), cpu(m), cpu(v), {}, cpu(shard), s);
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const ZeroBucket& k = part->buckets()[b];
    zero_all_gather(**comm, *part, b, engine::slice_rows(cpu(p), k.begin, k.end),
                    zero_piece_view(*part, b, cpu(p)), s);
  }
  // f32: the gradient sums run in another order (at most 4 terms).
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(p[i], ref[i], 1e-5f) << i;
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const ZeroPiece q = part->piece(b);
    for (int64_t i = 0; i < q.numel(); ++i) {
      ASSERT_NEAR(m[q.shard_offset + i], rm[q.begin + i], 1e-6f) << b << " " << i;
    }
  }
  // The all-gather from a separate shard buffer (ZeRO-3's compute copy) into a fresh bucket.
  std::vector<float> value_shard(ns), gathered(n, -1.0f);
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const ZeroPiece q = part->piece(b);
    for (int64_t i = 0; i < q.numel(); ++i) value_shard[q.shard_offset + i] = ref[q.begin + i];
  }
  for (size_t b = 0; b < part->buckets().size(); ++b) {
    const ZeroBucket& k = part->buckets()[b];
    zero_all_gather(**comm, *part, b, engine::slice_rows(cpu(gathered), k.begin, k.end),
                    zero_piece_view(*part, b, cpu(value_shard)), s);
  }
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(gathered[i], ref[i]) << i;
}

}  // namespace
}  // namespace anvil::parallel
