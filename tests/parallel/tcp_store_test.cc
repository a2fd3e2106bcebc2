// TcpStore with 1-4 forked ranks on 127.0.0.1: set/get (waiting), add, barrier, binary values;
// timeouts, a missing rank 0, a taken port and a dead server are errors naming MASTER_ADDR,
// the port and what timed out.
#include "parallel/tcp_store.h"

#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/tcp_socket.h"
#include "tests/testing/fork_ranks.h"

namespace anvil::parallel {
namespace {

using testing::expect_all_ranks_passed;
using testing::free_tcp_port;
using ::testing::HasSubstr;
using testing::run_forked_ranks;

#define EXPECT_OK(expr)              \
  do {                               \
    const absl::Status st_ = (expr); \
    EXPECT_TRUE(st_.ok()) << st_;    \
  } while (0)

std::unique_ptr<TcpStore> join(int port, int rank, int world, double timeout_s = 20.0) {
  auto s = TcpStore::create("127.0.0.1", port, rank, world, timeout_s);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? std::move(*s) : nullptr;
}

TEST(TcpStoreTest, SetGetAddBarrier) {
  for (int world : {1, 2, 4}) {
    const int port = free_tcp_port();
    expect_all_ranks_passed(run_forked_ranks(world, 60, [&](int rank) {
      std::unique_ptr<TcpStore> s = join(port, rank, world);
      if (!s) return;
      // Values are bytes: a zero byte and a large value travel intact.
      const std::string mine = std::string("rank\0", 5) + std::to_string(rank) +
                               std::string(static_cast<size_t>(100000 * rank), 'x');
      EXPECT_TRUE(s->set("value/" + std::to_string(rank), mine).ok());
      for (int r = 0; r < world; ++r) {
        auto v = s->get("value/" + std::to_string(r));  // waits for rank r's set
        ASSERT_TRUE(v.ok()) << v.status();
        EXPECT_EQ(*v, std::string("rank\0", 5) + std::to_string(r) +
                          std::string(static_cast<size_t>(100000 * r), 'x'));
      }
      // add: every rank adds rank + 1; after a barrier the total is world (world + 1) / 2.
      EXPECT_TRUE(s->add("count", rank + 1).ok());
      EXPECT_OK(s->barrier());
      auto total = s->add("count", 0);
      ASSERT_TRUE(total.ok());
      EXPECT_EQ(*total, world * (world + 1) / 2);
      // A later set replaces the value; barriers can repeat.
      EXPECT_OK(s->barrier());
      if (rank == 0) {
        EXPECT_OK(s->set("value/0", "new"));
      }
      EXPECT_OK(s->barrier());
      EXPECT_EQ(s->get("value/0").value_or(""), "new");
      EXPECT_EQ(s->unique_key("comm"), "comm/0");
      EXPECT_EQ(s->unique_key("comm"), "comm/1");
      EXPECT_OK(s->barrier());  // rank 0 serves until everyone is done
    }));
  }
}

TEST(TcpStoreTest, OtherRanksMayStartBeforeRankZero) {
  const int port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(3, 60, [&](int rank) {
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(700));
    std::unique_ptr<TcpStore> s = join(port, rank, 3);
    if (!s) return;
    if (rank == 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
    if (rank == 0) {
      EXPECT_OK(s->set("late", "here"));
    }
    EXPECT_EQ(s->get("late").value_or("missing"), "here");  // ranks 1, 2 wait for it
    EXPECT_OK(s->barrier());
  }));
}

TEST(TcpStoreTest, GetTimesOutNamingTheKeyAndAddress) {
  const int port = free_tcp_port();
  auto s = TcpStore::create("127.0.0.1", port, 0, 1, 0.3);
  ASSERT_TRUE(s.ok()) << s.status();
  const auto start = std::chrono::steady_clock::now();
  auto v = (*s)->get("never");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  ASSERT_FALSE(v.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(v.status())) << v.status();
  const std::string m(v.status().message());
  EXPECT_THAT(m, HasSubstr("MASTER_ADDR=127.0.0.1 port " + std::to_string(port)));
  EXPECT_THAT(m, HasSubstr("get(\"never\")"));
  EXPECT_THAT(m, HasSubstr("timed out after"));
  EXPECT_THAT(m, HasSubstr("timeout 0.3 s"));
}

TEST(TcpStoreTest, NoRankZeroTimesOut) {
  const int port = free_tcp_port();
  auto s = TcpStore::create("127.0.0.1", port, 1, 2, 0.5);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(absl::IsDeadlineExceeded(s.status())) << s.status();
  const std::string m(s.status().message());
  EXPECT_THAT(m, HasSubstr("rank 1 joining the rendezvous store (MASTER_ADDR=127.0.0.1 "
                           "port " +
                           std::to_string(port)));
  EXPECT_THAT(m, HasSubstr("could not connect to 127.0.0.1 port " + std::to_string(port)));
  EXPECT_THAT(m, HasSubstr("Connection refused"));
}

TEST(TcpStoreTest, TakenPortIsAnError) {
  auto taken = tcp_listen(0);
  ASSERT_TRUE(taken.ok());
  const int port = bound_port(taken->get());
  auto s = TcpStore::create("127.0.0.1", port, 0, 2, 1.0);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("rank 0 cannot serve the rendezvous store (MASTER_ADDR=127.0.0.1 "
                        "port " +
                        std::to_string(port) + "): cannot listen on TCP port " +
                        std::to_string(port) + ": Address already in use"));
}

TEST(TcpStoreTest, DeadServerIsAnError) {
  const int port = free_tcp_port();
  expect_all_ranks_passed(run_forked_ranks(2, 60, [&](int rank) {
    std::unique_ptr<TcpStore> s = join(port, rank, 2);
    if (!s) return;
    if (rank == 0) {
      EXPECT_TRUE(s->get("ready").ok());
      ::_exit(0);  // dies: the server goes with it
    }
    EXPECT_OK(s->set("ready", ""));
    auto v = s->get("never");
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()),
                HasSubstr("(rank 0, which serves the store, has exited or died)"));
  }));
}

}  // namespace
}  // namespace anvil::parallel
