// TcpComm against closed forms, with 2, 3 and 4 forked ranks on 127.0.0.1 (as torchrun starts
// them): all_reduce (sum/max, f32 f64 i32 i64, in place, sizes not divisible by the ranks,
// bitwise equal to the sum in group-rank order), reduce_scatter, all_gather (any dtype, in
// place), broadcast from every root, send/recv, batch_p2p both ways with payloads larger than
// the socket buffers, barrier, the grid's groups; the watchdog hook, the default watchdog and a
// dead peer end the ranks with a message instead of a hang; mismatched calls are named.
#include "parallel/tcp_comm.h"

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/grid.h"
#include "parallel/tcp_store.h"
#include "tests/testing/fork_ranks.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;
using engine::make_view;
using testing::expect_all_ranks_passed;
using testing::free_tcp_port;
using ::testing::HasSubstr;
using testing::RankResult;
using testing::run_forked_ranks;

constexpr double kTestTimeoutS = 120.0;

// What one rank of a forked test holds: the store and a TcpComm over the world.
struct Rank {
  std::unique_ptr<TcpStore> store;
  std::unique_ptr<ProcessGrid> grid;
  std::unique_ptr<TcpComm> comm;
};

Rank join(int port, int rank, int world, const CommOptions& opt = {}) {
  Rank r;
  auto store = TcpStore::create("127.0.0.1", port, rank, world, 30.0);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return r;
  r.store = std::move(*store);
  auto grid = ProcessGrid::create(world, rank, 1, 1);
  EXPECT_TRUE(grid.ok()) << grid.status();
  r.grid = std::make_unique<ProcessGrid>(std::move(*grid));
  auto comm = TcpComm::create(r.grid->world_group(), rank, r.store.get(), opt);
  EXPECT_TRUE(comm.ok()) << comm.status();
  if (comm.ok()) r.comm = std::move(*comm);
  return r;
}

// Runs body(rank, comm) on `world` forked ranks joined over a fresh port; expects all to pass.
void on_ranks(int world, const std::function<void(int, TcpComm&)>& body) {
  const int port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(world, kTestTimeoutS, [&](int rank) {
    Rank r = join(port, rank, world);
    if (r.comm) body(rank, *r.comm);
  }));
}

class TcpCommTest : public ::testing::TestWithParam<int> {};

// Rank r's f32 contribution at i: not exact in float, so the order of the sum shows.
float contribution(int r, int64_t i) {
  return 0.1f * static_cast<float>(r + 1) + 1e-3f * std::sin(static_cast<float>(i * (r + 3)));
}

TEST_P(TcpCommTest, AllReduceSumsInGroupRankOrderBitwise) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{1001}, int64_t{1} << 18}) {
      std::vector<float> send(static_cast<size_t>(n)), recv(static_cast<size_t>(n), NAN);
      for (int64_t i = 0; i < n; ++i) send[static_cast<size_t>(i)] = contribution(rank, i);
      c.all_reduce(make_view(recv.data(), DType::kF32, Device::kCpu, {n}),
                   make_view(send.data(), DType::kF32, Device::kCpu, {n}), ReduceOp::kSum, s);
      int64_t bad = 0;
      for (int64_t i = 0; i < n; ++i) {
        float want = contribution(0, i);
        for (int r = 1; r < world; ++r) want += contribution(r, i);  // group-rank order, f32
        if (recv[static_cast<size_t>(i)] != want) ++bad;
      }
      EXPECT_EQ(bad, 0) << "n " << n << ": elements not bitwise the in-order sum";
      // In place gives the same bits.
      c.all_reduce(make_view(send.data(), DType::kF32, Device::kCpu, {n}), ReduceOp::kSum, s);
      EXPECT_EQ(send, recv) << "n " << n;
    }
  });
}

TEST_P(TcpCommTest, AllReduceDtypesAndMax) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    const int64_t n = 37;
    std::vector<double> d(n);
    std::vector<int32_t> i32(n);
    std::vector<int64_t> i64(n);
    std::vector<float> mx(n);
    for (int64_t i = 0; i < n; ++i) {
      d[static_cast<size_t>(i)] = rank * 1000.0 + static_cast<double>(i);
      i32[static_cast<size_t>(i)] = rank * 7 - static_cast<int32_t>(i);
      i64[static_cast<size_t>(i)] = (int64_t{1} << 40) * rank + i;
      mx[static_cast<size_t>(i)] = static_cast<float>((rank * 13 + i * 5) % 11);
    }
    c.all_reduce(make_view(d.data(), DType::kF64, Device::kCpu, {n}), ReduceOp::kSum, s);
    c.all_reduce(make_view(i32.data(), DType::kI32, Device::kCpu, {n}), ReduceOp::kSum, s);
    c.all_reduce(make_view(i64.data(), DType::kI64, Device::kCpu, {n}), ReduceOp::kSum, s);
    c.all_reduce(make_view(mx.data(), DType::kF32, Device::kCpu, {n}), ReduceOp::kMax, s);
    const int64_t ranks_sum = int64_t{world} * (world - 1) / 2;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = static_cast<size_t>(i);
      EXPECT_EQ(d[k], 1000.0 * static_cast<double>(ranks_sum) + static_cast<double>(world * i));
      EXPECT_EQ(i32[k], static_cast<int32_t>(7 * ranks_sum - world * i));
      EXPECT_EQ(i64[k], (int64_t{1} << 40) * ranks_sum + world * i);
      float want = 0;
      for (int r = 0; r < world; ++r)
        want = std::max(want, static_cast<float>((r * 13 + i * 5) % 11));
      EXPECT_EQ(mx[k], want);
    }
  });
}

TEST_P(TcpCommTest, ReduceScatter) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    const int64_t n = 129;
    // send[j * n + i] = rank + 10 j + 100 i  ->  recv[i] = sum_r r + P (10 me + 100 i)
    std::vector<double> send(static_cast<size_t>(world * n)), recv(static_cast<size_t>(n));
    for (int j = 0; j < world; ++j) {
      for (int64_t i = 0; i < n; ++i)
        send[static_cast<size_t>(j * n + i)] = rank + 10 * j + 100 * i;
    }
    c.reduce_scatter(make_view(recv.data(), DType::kF64, Device::kCpu, {n}),
                     make_view(send.data(), DType::kF64, Device::kCpu, {world * n}), ReduceOp::kSum,
                     s);
    const double rs = world * (world - 1) / 2.0;
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_EQ(recv[static_cast<size_t>(i)], rs + world * (10.0 * rank + 100.0 * i)) << i;
    }
    // In place: recv is this rank's slice of send.
    double* slice = send.data() + rank * n;
    c.reduce_scatter(make_view(slice, DType::kF64, Device::kCpu, {n}),
                     make_view(send.data(), DType::kF64, Device::kCpu, {world * n}), ReduceOp::kSum,
                     s);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(slice[i], recv[static_cast<size_t>(i)]) << i;
  });
}

TEST_P(TcpCommTest, AllGatherAnyDtype) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    const int64_t n = 5;
    std::vector<uint8_t> send(n), recv(static_cast<size_t>(world * n), 0xEE);
    for (int64_t i = 0; i < n; ++i)
      send[static_cast<size_t>(i)] = static_cast<uint8_t>(10 * rank + i);
    c.all_gather(make_view(recv.data(), DType::kU8, Device::kCpu, {world * n}),
                 make_view(send.data(), DType::kU8, Device::kCpu, {n}), s);
    for (int r = 0; r < world; ++r) {
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(recv[static_cast<size_t>(r * n + i)], 10 * r + i);
    }
    // In place, bf16 bits (data movement takes any dtype).
    std::vector<uint16_t> buf(static_cast<size_t>(world * n), 0);
    for (int64_t i = 0; i < n; ++i)
      buf[static_cast<size_t>(rank * n + i)] = static_cast<uint16_t>(0x3f80 + rank);
    c.all_gather(make_view(buf.data(), DType::kBF16, Device::kCpu, {world * n}),
                 make_view(buf.data() + rank * n, DType::kBF16, Device::kCpu, {n}), s);
    for (int r = 0; r < world; ++r) EXPECT_EQ(buf[static_cast<size_t>(r * n)], 0x3f80 + r);
  });
}

TEST_P(TcpCommTest, BroadcastFromEveryRoot) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    for (int root = 0; root < world; ++root) {
      std::vector<int64_t> buf(300, rank == root ? 1000 + root : -1);
      c.broadcast(make_view(buf.data(), DType::kI64, Device::kCpu, {300}), root, s);
      EXPECT_EQ(buf, std::vector<int64_t>(300, 1000 + root)) << "root " << root;
    }
  });
}

TEST_P(TcpCommTest, SendRecvRing) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    const int next = (rank + 1) % world, prev = (rank + world - 1) % world;
    float out = static_cast<float>(rank), in = -1.0f;
    auto vout = make_view(&out, DType::kF32, Device::kCpu, {1});
    auto vin = make_view(&in, DType::kF32, Device::kCpu, {1});
    if (rank % 2 == 0) {
      c.send(vout, next, s);
      c.recv(vin, prev, s);
    } else {
      c.recv(vin, prev, s);
      c.send(vout, next, s);
    }
    EXPECT_EQ(in, static_cast<float>(prev));
  });
}

TEST_P(TcpCommTest, BatchP2pBothWaysLargerThanSocketBuffers) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    // Every rank sends two messages to every other one, and receives two from each, all in one
    // batch with the sends first: 8 MiB each way, so blocking sends would deadlock.
    const int64_t n = int64_t{1} << 20;
    std::vector<std::vector<double>> out, in;
    std::vector<P2pOp> ops;
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      for (int m = 0; m < 2; ++m) {
        out.emplace_back(static_cast<size_t>(n), 100.0 * rank + 10.0 * peer + m);
        in.emplace_back(static_cast<size_t>(n), -1.0);
      }
    }
    size_t k = 0;
    for (int peer = 0; peer < world; ++peer) {
      if (peer == rank) continue;
      for (int m = 0; m < 2; ++m, ++k) {
        ops.push_back({true, make_view(out[k].data(), DType::kF64, Device::kCpu, {n}), peer});
      }
    }
    k = 0;
    for (int peer = world - 1; peer >= 0; --peer) {  // recvs in another peer order
      if (peer == rank) continue;
      for (int m = 0; m < 2; ++m, ++k) {
        ops.push_back({false, make_view(in[k].data(), DType::kF64, Device::kCpu, {n}), peer});
      }
    }
    c.batch_p2p(ops, s);
    k = 0;
    for (int peer = world - 1; peer >= 0; --peer) {
      if (peer == rank) continue;
      for (int m = 0; m < 2; ++m, ++k) {
        // Messages in one direction match in list order: m-th recv gets the m-th send.
        const double want = 100.0 * peer + 10.0 * rank + m;
        EXPECT_EQ(in[k].front(), want);
        EXPECT_EQ(in[k].back(), want);
      }
    }
  });
}

TEST_P(TcpCommTest, BarrierWaitsForTheLastRank) {
  const int world = GetParam();
  on_ranks(world, [&](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    c.barrier(s);  // line the ranks up (repeatable), so their clocks start together
    const auto start = std::chrono::steady_clock::now();
    if (rank == world - 1) std::this_thread::sleep_for(std::chrono::milliseconds(400));
    c.barrier(s);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_GE(waited, 0.25) << "returned before the last rank entered";
  });
}

TEST_P(TcpCommTest, GridGroups) {
  const int world = GetParam();
  if (world % 2 != 0) GTEST_SKIP() << "tp=2 needs an even world";
  const int port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(world, kTestTimeoutS, [&](int rank) {
    auto store = TcpStore::create("127.0.0.1", port, rank, world, 30.0);
    ASSERT_TRUE(store.ok()) << store.status();
    auto grid = ProcessGrid::create(world, rank, /*tp=*/2, /*pp=*/1);
    ASSERT_TRUE(grid.ok());
    auto comms = create_tcp_group_comms(*grid, store->get(), CommOptions{});
    ASSERT_TRUE(comms.ok()) << comms.status();
    Stream s = Stream::cpu();
    // Sum of the global ranks of each group: closed forms from the grid's arithmetic.
    auto group_sum = [&](Comm& c) {
      double v = rank;
      c.all_reduce(make_view(&v, DType::kF64, Device::kCpu, {1}), ReduceOp::kSum, s);
      return v;
    };
    const int tp_base = rank - grid->tp_rank();
    EXPECT_EQ(group_sum(*comms->tp), 2.0 * tp_base + 1);
    const int dp = world / 2;
    EXPECT_EQ(group_sum(*comms->dp), grid->tp_rank() * dp + 2.0 * dp * (dp - 1) / 2);
    EXPECT_EQ(group_sum(*comms->world), world * (world - 1) / 2.0);
    EXPECT_EQ(group_sum(*comms->pp), static_cast<double>(rank));  // pp = 1: the rank alone
    ASSERT_NE(comms->embedding, nullptr);
    EXPECT_EQ(comms->embedding->size(), 1);
  }));
}

INSTANTIATE_TEST_SUITE_P(Worlds, TcpCommTest, ::testing::Values(2, 3, 4),
                         [](const ::testing::TestParamInfo<int>& i) {
                           return absl::StrCat("np", i.param);
                         });

TEST(TcpCommSingle, GroupOfOneNeedsNoStore) {
  auto grid = ProcessGrid::create(1, 0, 1, 1);
  ASSERT_TRUE(grid.ok());
  auto comms = create_tcp_group_comms(*grid, nullptr, CommOptions{});
  ASSERT_TRUE(comms.ok()) << comms.status();
  Stream s = Stream::cpu();
  float x[2] = {1.5f, -2.0f}, y[2] = {0, 0};
  comms->world->all_reduce(make_view(y, DType::kF32, Device::kCpu, {2}),
                           make_view(x, DType::kF32, Device::kCpu, {2}), ReduceOp::kSum, s);
  EXPECT_EQ(y[0], 1.5f);
  EXPECT_EQ(y[1], -2.0f);
  comms->dp->barrier(s);
  // A larger group without a store is an error, not a crash.
  auto g2 = ProcessGrid::create(2, 0, 1, 1);
  ASSERT_TRUE(g2.ok());
  auto c = TcpComm::create(g2->world_group(), 0, nullptr, CommOptions{});
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("needs a rendezvous store"));
}

TEST(TcpCommWatchdog, HookFiresThenTheOperationCompletes) {
  const int port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(2, kTestTimeoutS, [&](int rank) {
    std::vector<std::string> messages;
    CommOptions opt;
    opt.timeout_s = 0.2;
    opt.on_timeout = [&](const std::string& m) { messages.push_back(m); };
    Rank r = join(port, rank, 2, opt);
    ASSERT_NE(r.comm, nullptr);
    Stream s = Stream::cpu();
    float x = 1.0f;
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    r.comm->all_reduce(make_view(&x, DType::kF32, Device::kCpu, {1}), ReduceOp::kSum, s);
    EXPECT_EQ(x, 2.0f);
    if (rank == 1) {
      EXPECT_TRUE(messages.empty());
      return;
    }
    ASSERT_FALSE(messages.empty());
    const std::string& m = messages.front();
    EXPECT_THAT(m, HasSubstr("watchdog: all_reduce #1 (sum of f32[1]"));
    EXPECT_THAT(m, HasSubstr("on the world group 0 of ranks {0, 1}"));
    EXPECT_THAT(m, HasSubstr("on global rank 0 (group rank 0 of 2)"));
    EXPECT_THAT(m, HasSubstr("has not finished after"));
  }));
}

// The ranks' results of a run where a rank misbehaves; each must end (no hang).
std::vector<RankResult> misbehave(const CommOptions& opt,
                                  const std::function<void(int, TcpComm&)>& body) {
  const int port = free_tcp_port();
  return run_forked_ranks(2, kTestTimeoutS, [&](int rank) {
    ::signal(SIGABRT, SIG_DFL);
    Rank r = join(port, rank, 2, opt);
    if (r.comm) body(rank, *r.comm);
  });
}

TEST(TcpCommWatchdog, DefaultAbortsTheRankWithAMessage) {
  CommOptions opt;
  opt.timeout_s = 0.5;  // default action: print and abort
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankResult> res = misbehave(opt, [](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    float x = 1.0f;
    // Rank 1 is alive but late: rank 0's watchdog ends rank 0; rank 1 then finds it gone.
    if (rank == 1) std::this_thread::sleep_for(std::chrono::milliseconds(3000));
    c.all_reduce(make_view(&x, DType::kF32, Device::kCpu, {1}), ReduceOp::kSum, s);
    ADD_FAILURE() << "all_reduce returned although a rank failed";
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 30);
  EXPECT_EQ(res[0].signal, SIGABRT) << res[0].output;
  EXPECT_THAT(res[0].output, HasSubstr("[anvil rank 0] watchdog: all_reduce #1 (sum of f32[1]"));
  EXPECT_EQ(res[1].signal, SIGABRT) << res[1].output;
  EXPECT_THAT(res[1].output,
              HasSubstr("[anvil rank 1] TcpComm all_reduce on the world group 0 of ranks {0, 1}: "
                        "the connection to group rank 0 (global rank 0) failed on global rank 1"));
}

TEST(TcpCommFailure, DeadPeerEndsTheOtherRank) {
  CommOptions opt;
  opt.timeout_s = 60.0;  // the dead socket, not the watchdog, must end rank 0
  const auto start = std::chrono::steady_clock::now();
  std::vector<RankResult> res = misbehave(opt, [](int rank, TcpComm& c) {
    if (rank == 1) ::_exit(7);  // dies before the collective
    Stream s = Stream::cpu();
    std::vector<float> x(1000, 1.0f);
    c.all_reduce(make_view(x.data(), DType::kF32, Device::kCpu, {1000}), ReduceOp::kSum, s);
    ADD_FAILURE() << "all_reduce returned although rank 1 died";
  });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 20);
  EXPECT_EQ(res[1].exit_code, 7);
  EXPECT_EQ(res[0].signal, SIGABRT) << res[0].output;
  EXPECT_THAT(res[0].output,
              HasSubstr("TcpComm all_reduce on the world group 0 of ranks {0, 1}: the connection "
                        "to group rank 1 (global rank 1) failed on global rank 0: "));
  // EOF or reset, as the kernel reports the closed socket.
  EXPECT_THAT(res[0].output, HasSubstr("(that rank exited, crashed or aborted: see its output)"));
}

TEST(TcpCommFailure, MismatchedCallsAreNamed) {
  std::vector<RankResult> res = misbehave(CommOptions{}, [](int rank, TcpComm& c) {
    Stream s = Stream::cpu();
    std::vector<float> x(rank == 0 ? 4 : 8, 1.0f);
    const int64_t n = static_cast<int64_t>(x.size());
    if (rank == 0) {
      c.broadcast(make_view(x.data(), DType::kF32, Device::kCpu, {n}), 1, s);
    } else {
      c.broadcast(make_view(x.data(), DType::kF32, Device::kCpu, {n}), 1, s);
      c.barrier(s);  // rank 0 has aborted: its closed connection ends this rank too
    }
  });
  EXPECT_EQ(res[0].signal, SIGABRT) << res[0].output;
  EXPECT_THAT(res[0].output, HasSubstr("it sent part of a broadcast of 32 bytes where this rank "
                                       "expects part of a broadcast of 16 bytes"));
}

}  // namespace
}  // namespace anvil::parallel
