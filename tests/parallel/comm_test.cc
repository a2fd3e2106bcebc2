// Collectives with analytic results (Megatron's test style: input = f(rank), assert the closed
// form), on MpiComm over the world and over the sub-groups of a grid, and on NcclComm when
// there is one GPU per rank (skipped here: no GPU; on the H200 as a single-rank world, where
// batch_p2p, which needs a peer, skips too). Values are small integers, exact in every dtype,
// so results compare with ==.
// Every rank runs every test and calls the collectives in the same order; assertions come after
// the communication so that no rank leaves a test early while others wait for it.
#include "parallel/comm.h"

#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "engine/device.h"
#include "engine/dtype.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "engine/stream.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"
#include "parallel/nccl_comm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;
using ::testing::HasSubstr;

int world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

ProcessGrid grid(int tp = 1, int pp = 1) {
  auto g = ProcessGrid::create(world_size(), world_rank(), tp, pp);
  ANVIL_CHECK_OK(g.status());
  return *g;
}

std::unique_ptr<MpiComm> mpi_comm(const ProcessGroup& group) {
  CommOptions opt;
  opt.timeout_s = 120.0;
  auto c = MpiComm::create(MPI_COMM_WORLD, group, world_rank(), opt);
  ANVIL_CHECK_OK(c.status());
  return std::move(*c);
}

// A host buffer of `n` elements of dtype T with a view.
template <typename T>
struct Host {
  std::vector<T> data;
  explicit Host(int64_t n, T fill = T(0)) : data(static_cast<size_t>(n), fill) {}
  TensorView view(DType dt) {
    return engine::make_view(data.data(), dt, Device::kCpu, {static_cast<int64_t>(data.size())});
  }
};

template <typename T>
void check_all_reduce(Comm& comm, DType dt) {
  const int P = comm.size(), me = comm.index();
  const int64_t n = 1000;
  Host<T> send(n), recv(n, T(-7)), inplace(n);
  for (int64_t i = 0; i < n; ++i) {
    send.data[i] = static_cast<T>((me + 1) * (i % 13 + 1));
    inplace.data[i] = send.data[i];
  }
  Stream s = Stream::cpu();
  comm.all_reduce(recv.view(dt), send.view(dt), ReduceOp::kSum, s);
  comm.all_reduce(inplace.view(dt), ReduceOp::kMax, s);
  const int64_t rank_sum = static_cast<int64_t>(P) * (P + 1) / 2;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(recv.data[i], static_cast<T>(rank_sum * (i % 13 + 1))) << i;
    ASSERT_EQ(inplace.data[i], static_cast<T>(P * (i % 13 + 1))) << i;
  }
}

TEST(MpiCommTest, AllReduceSumAndMaxEveryDtype) {
  auto c = mpi_comm(grid().world_group());
  check_all_reduce<float>(*c, DType::kF32);
  check_all_reduce<double>(*c, DType::kF64);
  check_all_reduce<int32_t>(*c, DType::kI32);
  check_all_reduce<int64_t>(*c, DType::kI64);
}

TEST(MpiCommTest, AllReduceOfNothing) {
  auto c = mpi_comm(grid().world_group());
  Stream s = Stream::cpu();
  float x = 5.0f;
  c->all_reduce(engine::make_view(&x, DType::kF32, Device::kCpu, {0}), ReduceOp::kSum, s);
  EXPECT_EQ(x, 5.0f);
}

TEST(MpiCommTest, ReduceScatterOutOfPlaceAndInPlace) {
  auto c = mpi_comm(grid().world_group());
  const int P = c->size(), me = c->index();
  const int64_t n = 37;  // per rank
  Host<float> send(P * n), recv(n, -1.0f), inplace(P * n);
  for (int64_t j = 0; j < P * n; ++j) {
    send.data[j] = static_cast<float>((me + 1) * (j + 1));
    inplace.data[j] = send.data[j];
  }
  Stream s = Stream::cpu();
  c->reduce_scatter(recv.view(DType::kF32), send.view(DType::kF32), ReduceOp::kSum, s);
  // In place: recv is this rank's slice of the send buffer.
  TensorView whole = inplace.view(DType::kF32);
  TensorView mine = engine::slice_rows(whole, me * n, (me + 1) * n);
  c->reduce_scatter(mine, whole, ReduceOp::kSum, s);
  const float rank_sum = static_cast<float>(P * (P + 1) / 2);
  for (int64_t i = 0; i < n; ++i) {
    const float expect = rank_sum * static_cast<float>(me * n + i + 1);
    ASSERT_EQ(recv.data[i], expect) << i;
    ASSERT_EQ(inplace.data[me * n + i], expect) << i;
  }
}

TEST(MpiCommTest, AllGatherAnyDtypeOutOfPlaceAndInPlace) {
  auto c = mpi_comm(grid().world_group());
  const int P = c->size(), me = c->index();
  const int64_t n = 5;
  // bf16: data movement needs no arithmetic, so MPI moves it as bytes.
  Host<uint16_t> send(n), recv(P * n, 0xffff), inplace(P * n, 0xffff);
  for (int64_t i = 0; i < n; ++i) {
    send.data[i] = engine::f32_to_bf16(static_cast<float>(me * 100 + i));
    inplace.data[me * n + i] = send.data[i];
  }
  Stream s = Stream::cpu();
  c->all_gather(recv.view(DType::kBF16), send.view(DType::kBF16), s);
  TensorView whole = inplace.view(DType::kBF16);
  c->all_gather(whole, engine::slice_rows(whole, me * n, (me + 1) * n), s);
  for (int r = 0; r < P; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(engine::bf16_to_f32(recv.data[r * n + i]),
                engine::round_to_bf16(static_cast<float>(r * 100 + i)));
      ASSERT_EQ(inplace.data[r * n + i], recv.data[r * n + i]);
    }
  }
}

TEST(MpiCommTest, BroadcastFromTheLastRank) {
  auto c = mpi_comm(grid().world_group());
  const int P = c->size(), me = c->index();
  Host<int64_t> buf(9, me == P - 1 ? int64_t{42} : int64_t{-1});
  Stream s = Stream::cpu();
  c->broadcast(buf.view(DType::kI64), P - 1, s);
  for (int64_t v : buf.data) ASSERT_EQ(v, 42);
}

TEST(MpiCommTest, SendRecvAroundARing) {
  auto c = mpi_comm(grid().world_group());
  const int P = c->size(), me = c->index();
  if (P == 1) GTEST_SKIP() << "needs 2 ranks";
  Host<float> out(100), in(100, -1.0f);
  for (int i = 0; i < 100; ++i) out.data[i] = static_cast<float>(me * 1000 + i);
  Stream s = Stream::cpu();
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  // Even ranks send first, odd ranks receive first: no cycle of blocked senders.
  if (me % 2 == 0) {
    c->send(out.view(DType::kF32), next, s);
    c->recv(in.view(DType::kF32), prev, s);
  } else {
    c->recv(in.view(DType::kF32), prev, s);
    c->send(out.view(DType::kF32), next, s);
  }
  for (int i = 0; i < 100; ++i) ASSERT_EQ(in.data[i], static_cast<float>(prev * 1000 + i));
}

// The ops of one ring exchange: a big message to the next rank and a small one to the previous,
// received from the other side. Sends keep the order (big, small) and recvs (big, small) on every
// rank, so with 2 ranks (next == prev) the two messages in each direction match in list order;
// the interleaving of sends and recvs differs between even and odd ranks (any order must work).
std::vector<P2pOp> ring_ops(int me, int P, TensorView big_out, TensorView small_out,
                            TensorView big_in, TensorView small_in) {
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  const P2pOp send_big{true, big_out, next}, send_small{true, small_out, prev};
  const P2pOp recv_big{false, big_in, prev}, recv_small{false, small_in, next};
  if (me % 2 == 0) return {send_big, send_small, recv_big, recv_small};
  return {recv_big, send_big, recv_small, send_small};
}

// Analytic payloads: exact in f32 (< 2^24) and i64.
float big_value(int rank, int round, int64_t i) {
  return static_cast<float>((rank * 2 + round) * (int64_t{1} << 20) + i);
}
int64_t small_value(int rank, int round, int64_t i) { return rank * 1000 + round * 100 + i; }

TEST(MpiCommTest, BatchP2pExchangesWithBothRingNeighbours) {
  auto c = mpi_comm(grid().world_group());
  const int P = c->size(), me = c->index();
  Stream s = Stream::cpu();
  c->batch_p2p({}, s);  // an empty batch returns at once, on any world
  if (P == 1) GTEST_SKIP() << "needs 2 ranks (a rank has no peer of its own)";
  // 1M floats (4 MiB) is far above MPI's eager limit: had every rank called a blocking send
  // first, all would wait for a recv that is never posted. One batch cannot deadlock.
  const int64_t nb = int64_t{1} << 20, ns = 17;
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  // Two back-to-back batches (they must stay matched); checks after all communication.
  std::vector<Host<float>> big_out, big_in;
  std::vector<Host<int64_t>> small_out, small_in;
  for (int round = 0; round < 2; ++round) {
    big_out.emplace_back(nb);
    big_in.emplace_back(nb, -1.0f);
    small_out.emplace_back(ns);
    small_in.emplace_back(ns, -1);
    for (int64_t i = 0; i < nb; ++i) big_out[round].data[i] = big_value(me, round, i);
    for (int64_t i = 0; i < ns; ++i) small_out[round].data[i] = small_value(me, round, i);
    c->batch_p2p(
        ring_ops(me, P, big_out[round].view(DType::kF32), small_out[round].view(DType::kI64),
                 big_in[round].view(DType::kF32), small_in[round].view(DType::kI64)),
        s);
  }
  for (int round = 0; round < 2; ++round) {
    for (int64_t i = 0; i < nb; ++i) {
      ASSERT_EQ(big_in[round].data[i], big_value(prev, round, i)) << "round " << round << " " << i;
      ASSERT_EQ(big_out[round].data[i], big_value(me, round, i));  // a send leaves its buffer
    }
    for (int64_t i = 0; i < ns; ++i) {
      ASSERT_EQ(small_in[round].data[i], small_value(next, round, i)) << "round " << round;
    }
  }
}

// A peer that posts its half late makes the watchdog report the batch (a recording hook instead
// of the abort), and the batch still completes once the peer joins. Ranks 0 and 1 only.
TEST(MpiCommTest, BatchP2pUnderTheWatchdog) {
  if (world_size() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::string> messages;
  CommOptions opt;
  opt.timeout_s = 0.2;
  opt.on_timeout = [&](const std::string& m) { messages.push_back(m); };
  auto made = MpiComm::create(MPI_COMM_WORLD, grid().world_group(), world_rank(), opt);
  ASSERT_TRUE(made.ok()) << made.status();
  MpiComm& c = **made;
  const int me = c.index();
  if (me > 1) return;
  const int peer = 1 - me;
  Host<float> out(8, static_cast<float>(me + 1)), in(8, -1.0f);
  Stream s = Stream::cpu();
  if (me == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  c.batch_p2p({{false, in.view(DType::kF32), peer}, {true, out.view(DType::kF32), peer}}, s);
  for (float v : in.data) EXPECT_EQ(v, static_cast<float>(peer + 1));
  if (me == 1) {
    EXPECT_TRUE(messages.empty());
  } else {
    ASSERT_FALSE(messages.empty());
    EXPECT_THAT(messages.front(), HasSubstr("watchdog: batch_p2p #1 (2 ops: recv f32[8]"));
    EXPECT_THAT(messages.front(), HasSubstr("from group rank 1, send f32[8]"));
    EXPECT_THAT(messages.front(), HasSubstr("to group rank 1)"));
  }
}

TEST(MpiCommTest, Barrier) {
  auto c = mpi_comm(grid().world_group());
  Stream s = Stream::cpu();
  c->barrier(s);
  c->barrier(s);
}

// Sub-groups of a TP2 x DP grid (when the world is even): each sums only its members' values.
TEST(MpiCommTest, GroupsOfAGridReduceOnlyTheirMembers) {
  if (world_size() % 2 != 0) GTEST_SKIP() << "needs an even world";
  const ProcessGrid g = grid(/*tp=*/2);
  auto comms = create_mpi_group_comms(g, CommOptions{});
  ASSERT_TRUE(comms.ok()) << comms.status();
  Stream s = Stream::cpu();
  double tp_sum = g.rank(), dp_sum = g.rank(), world_sum = g.rank();
  auto v = [](double* x) { return engine::make_view(x, DType::kF64, Device::kCpu, {1}); };
  comms->tp->all_reduce(v(&tp_sum), ReduceOp::kSum, s);
  comms->dp->all_reduce(v(&dp_sum), ReduceOp::kSum, s);
  comms->world->all_reduce(v(&world_sum), ReduceOp::kSum, s);
  double expect_tp = 0, expect_dp = 0;
  for (int r : g.tp_group().ranks) expect_tp += r;
  for (int r : g.dp_group().ranks) expect_dp += r;
  EXPECT_EQ(tp_sum, expect_tp);
  EXPECT_EQ(dp_sum, expect_dp);
  EXPECT_EQ(world_sum, g.world() * (g.world() - 1) / 2.0);
  EXPECT_EQ(comms->tp->size(), 2);
  EXPECT_EQ(comms->dp->size(), g.world() / 2);
  ASSERT_NE(comms->embedding, nullptr);  // PP 1: every rank is first and last stage
  EXPECT_EQ(comms->embedding->size(), 1);
}

// NCCL, one GPU per rank (local rank -> device). On the H200 machine: a single-rank world.
TEST(NcclCommTest, CollectivesWithAnalyticResults) {
  ANVIL_SKIP_WITHOUT_GPU();
  const int P = world_size(), me = world_rank();
  if (P > engine::cuda_device_count()) GTEST_SKIP() << "needs one GPU per rank";
  const ProcessGrid g = grid();
  auto mpi = mpi_comm(g.world_group());
  auto stream = Stream::cuda(me % engine::cuda_device_count());
  ASSERT_TRUE(stream.ok()) << stream.status();
  Stream& s = *stream;
  CommOptions opt;
  opt.timeout_s = 60.0;
  auto nccl = NcclComm::create(g.world_group(), me, mpi.get(), opt);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  NcclComm& c = **nccl;

  testing::TensorPool pool(Device::kCuda);
  const int64_t n = 1000;
  std::vector<float> x(n), big(P * n), gathered_in(n);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>((me + 1) * (i % 13 + 1));
  for (int64_t j = 0; j < P * n; ++j) big[j] = static_cast<float>((me + 1) * (j % 29 + 1));
  for (int64_t i = 0; i < n; ++i) gathered_in[i] = static_cast<float>(me * 100 + i % 50);
  TensorView sum_f32 = pool.from(x, DType::kF32, {n});
  TensorView sum_bf16 = pool.from(x, DType::kBF16, {n});
  TensorView max_out = pool.empty(DType::kF32, {n});
  TensorView rs_out = pool.empty(DType::kF32, {n});
  TensorView rs_in = pool.from(big, DType::kF32, {P * n});
  TensorView ag_in = pool.from(gathered_in, DType::kBF16, {n});
  TensorView ag_out = pool.empty(DType::kBF16, {P * n});
  TensorView bc = pool.from(std::vector<float>(7, me == 0 ? 3.0f : -1.0f), DType::kF32, {7});
  c.all_reduce(max_out, sum_f32, ReduceOp::kMax, s);
  c.all_reduce(sum_f32, ReduceOp::kSum, s);
  c.all_reduce(sum_bf16, ReduceOp::kSum, s);
  c.reduce_scatter(rs_out, rs_in, ReduceOp::kSum, s);
  c.all_gather(ag_out, ag_in, s);
  c.broadcast(bc, 0, s);
  c.barrier(s);
  s.synchronize();

  const float rank_sum = static_cast<float>(P * (P + 1) / 2);
  const std::vector<float> got_sum = testing::to_host(sum_f32), got_bf = testing::to_host(sum_bf16),
                           got_max = testing::to_host(max_out), got_rs = testing::to_host(rs_out),
                           got_ag = testing::to_host(ag_out), got_bc = testing::to_host(bc);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(got_sum[i], rank_sum * static_cast<float>(i % 13 + 1)) << i;
    ASSERT_EQ(got_bf[i], engine::round_to_bf16(rank_sum * static_cast<float>(i % 13 + 1))) << i;
    ASSERT_EQ(got_max[i], static_cast<float>(P * (i % 13 + 1))) << i;
    ASSERT_EQ(got_rs[i], rank_sum * static_cast<float>((me * n + i) % 29 + 1)) << i;
  }
  for (int r = 0; r < P; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_EQ(got_ag[r * n + i], engine::round_to_bf16(static_cast<float>(r * 100 + i % 50)))
          << r << " " << i;
    }
  }
  for (float v : got_bc) ASSERT_EQ(v, 3.0f);
}

// batch_p2p on NCCL: the ring exchange of the MPI test, one GPU per rank (2+ GPUs).
TEST(NcclCommTest, BatchP2pExchangesWithBothRingNeighbours) {
  ANVIL_SKIP_WITHOUT_GPU();
  const int P = world_size(), me = world_rank();
  if (P < 2 || P > engine::cuda_device_count()) GTEST_SKIP() << "needs 2+ ranks, one GPU each";
  const ProcessGrid g = grid();
  auto mpi = mpi_comm(g.world_group());
  auto stream = Stream::cuda(me % engine::cuda_device_count());
  ASSERT_TRUE(stream.ok()) << stream.status();
  Stream& s = *stream;
  CommOptions opt;
  opt.timeout_s = 60.0;
  auto nccl = NcclComm::create(g.world_group(), me, mpi.get(), opt);
  ASSERT_TRUE(nccl.ok()) << nccl.status();
  NcclComm& c = **nccl;

  testing::TensorPool pool(Device::kCuda);
  const int64_t nb = int64_t{1} << 20, ns = 17;
  std::vector<float> big(nb);
  std::vector<int32_t> small(ns);
  for (int64_t i = 0; i < nb; ++i) big[i] = big_value(me, 0, i);
  for (int64_t i = 0; i < ns; ++i) small[i] = static_cast<int32_t>(small_value(me, 0, i));
  TensorView big_out = pool.from(big, DType::kF32, {nb});
  TensorView small_out = pool.from_i32(small, {ns});
  TensorView big_in = pool.empty(DType::kF32, {nb});  // poisoned: NaN
  TensorView small_in = pool.empty(DType::kI32, {ns});
  c.batch_p2p(ring_ops(me, P, big_out, small_out, big_in, small_in), s);
  s.synchronize();
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  const std::vector<float> got_big = testing::to_host(big_in);
  const std::vector<int32_t> got_small = testing::to_host_i32(small_in);
  for (int64_t i = 0; i < nb; ++i) ASSERT_EQ(got_big[i], big_value(prev, 0, i)) << i;
  for (int64_t i = 0; i < ns; ++i) ASSERT_EQ(got_small[i], small_value(next, 0, i)) << i;
}

}  // namespace
}  // namespace anvil::parallel
