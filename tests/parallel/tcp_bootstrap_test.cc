// The NCCL bootstrap step without MPI (bootstrap.h): group rank 0's bytes reach every member
// through the rendezvous store (2-3 forked CPU ranks; successive calls get their own keys; a
// size mismatch is an error) and over a TcpComm; on a GPU, an NcclComm whose unique id went
// through the store (a world of one, as `torchrun --nproc-per-node 1` gives) computes
// collectives against closed forms into NaN-poisoned outputs. Skips the GPU part without one.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/bootstrap.h"
#include "parallel/grid.h"
#include "parallel/nccl_comm.h"
#include "parallel/tcp_comm.h"
#include "parallel/tcp_store.h"
#include "tests/testing/fork_ranks.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;
using testing::expect_all_ranks_passed;
using testing::free_tcp_port;
using ::testing::HasSubstr;
using testing::run_forked_ranks;

// 128 bytes (an ncclUniqueId's size) that depend on `call`.
std::vector<char> payload(int call) {
  std::vector<char> b(128);
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<char>(i * 7 + call * 31);
  return b;
}

TEST(BootstrapTest, ThroughTheStore) {
  const int world = 3, port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(world, 60, [&](int rank) {
    auto store = TcpStore::create("127.0.0.1", port, rank, world, 30.0);
    ASSERT_TRUE(store.ok()) << store.status();
    auto grid = ProcessGrid::create(world, rank, 1, 1);
    ASSERT_TRUE(grid.ok());
    // Two communicators of the same group, one after the other: each gets its own bytes.
    for (int call = 0; call < 2; ++call) {
      std::vector<char> buf = rank == 0 ? payload(call) : std::vector<char>(128, 0);
      const absl::Status st =
          broadcast_through(**store, grid->world_group())(buf.data(), buf.size());
      ASSERT_TRUE(st.ok()) << st;
      EXPECT_EQ(buf, payload(call)) << "call " << call;
    }
    // A member expecting another size is told so.
    std::vector<char> buf(rank == 0 ? 8 : 16, 1);
    const absl::Status st = broadcast_through(**store, grid->world_group())(buf.data(), buf.size());
    if (rank == 0) {
      EXPECT_TRUE(st.ok()) << st;
    } else {
      EXPECT_THAT(std::string(st.message()), HasSubstr("group rank 0 published 8 bytes under "
                                                       "\"bcast/world/0/2\", expected 16"));
    }
    EXPECT_TRUE((*store)->barrier().ok());
  }));
}

TEST(BootstrapTest, OverACpuComm) {
  const int world = 2, port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(world, 60, [&](int rank) {
    auto store = TcpStore::create("127.0.0.1", port, rank, world, 30.0);
    ASSERT_TRUE(store.ok()) << store.status();
    auto grid = ProcessGrid::create(world, rank, 1, 1);
    ASSERT_TRUE(grid.ok());
    auto comm = TcpComm::create(grid->world_group(), rank, store->get(), CommOptions{});
    ASSERT_TRUE(comm.ok()) << comm.status();
    std::vector<char> buf = rank == 0 ? payload(5) : std::vector<char>(128, 0);
    const absl::Status st = broadcast_over(**comm)(buf.data(), buf.size());
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(buf, payload(5));
  }));
}

// GPU: the unique id of a one-rank NCCL communicator through the store (not the group-of-one
// shortcut), then collectives against closed forms into NaN-poisoned outputs.
TEST(BootstrapTest, NcclThroughTheStoreOnOneGpu) {
  ANVIL_SKIP_WITHOUT_GPU();
  auto store = TcpStore::create("127.0.0.1", free_tcp_port(), 0, 1, 30.0);
  ASSERT_TRUE(store.ok()) << store.status();
  auto grid = ProcessGrid::create(1, 0, 1, 1);
  ASSERT_TRUE(grid.ok());
  auto stream = Stream::cuda(0);
  ASSERT_TRUE(stream.ok()) << stream.status();
  Stream& s = *stream;
  CommOptions opt;
  opt.timeout_s = 60.0;
  auto nccl = NcclComm::create(grid->world_group(), 0,
                               broadcast_through(**store, grid->world_group()), opt);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  NcclComm& c = **nccl;
  // The id went through the store: the key is there.
  auto id = (*store)->get("bcast/world/0/0");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->size(), sizeof(ncclUniqueId));

  testing::TensorPool pool(Device::kCuda);
  const int64_t n = 1000;
  const std::vector<float> x = testing::random_uniform(n, 7);
  TensorView in = pool.from(x, DType::kF32, {n});
  TensorView sum = pool.empty(DType::kF32, {n});  // NaN until written
  TensorView gathered = pool.empty(DType::kBF16, {n});
  TensorView in_bf16 = pool.from(x, DType::kBF16, {n});
  c.all_reduce(sum, in, ReduceOp::kSum, s);
  c.all_gather(gathered, in_bf16, s);
  c.barrier(s);
  s.synchronize();
  // One rank: the sum is the input, the gather its bf16 copy (a NaN never equals).
  const std::vector<float> got = testing::to_host(sum), got_g = testing::to_host(gathered);
  const std::vector<float> want_g = testing::round_bf16(x);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got[static_cast<size_t>(i)], x[static_cast<size_t>(i)]) << i;
    ASSERT_EQ(got_g[static_cast<size_t>(i)], want_g[static_cast<size_t>(i)]) << i;
  }
}

}  // namespace
}  // namespace anvil::parallel
