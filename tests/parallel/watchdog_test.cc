// The collective watchdog. In-process: a rank that joins an all-reduce late makes the others'
// watchdog fire (a recording hook instead of the abort) with a message naming the operation,
// the group and the rank, and the collective still completes once it joins.
// End to end (DISABLED_ here, run by the CTest entry watchdog_test_abort_np3 with
// --gtest_also_run_disabled_tests): rank 1 never joins, the default action aborts every rank,
// mpirun exits non-zero and the message is on stderr.
#include <mpi.h>

#include <chrono>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"

namespace anvil::parallel {
namespace {

using engine::Device;
using engine::DType;
using testing::HasSubstr;

ProcessGrid world_grid() {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  auto g = ProcessGrid::create(world, rank, 1, 1);
  ANVIL_CHECK_OK(g.status());
  return *g;
}

TEST(WatchdogTest, LateRankMakesTheOthersReportAndTheCollectiveStillCompletes) {
  const ProcessGrid g = world_grid();
  if (g.world() < 2) GTEST_SKIP() << "needs 2 ranks";
  std::vector<std::string> messages;
  CommOptions opt;
  opt.timeout_s = 0.2;
  opt.on_timeout = [&](const std::string& m) { messages.push_back(m); };
  auto comm = MpiComm::create(MPI_COMM_WORLD, g.dp_group(), g.rank(), opt);
  ASSERT_TRUE(comm.ok()) << comm.status();

  Stream s = Stream::cpu();
  float x = 1.0f;
  if (g.rank() == 1) std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  (*comm)->all_reduce(engine::make_view(&x, DType::kF32, Device::kCpu, {1}), ReduceOp::kSum, s);
  EXPECT_EQ(x, static_cast<float>(g.world()));
  if (g.rank() == 1) {
    EXPECT_TRUE(messages.empty());
  } else {
    ASSERT_FALSE(messages.empty());
    const std::string& m = messages.front();
    EXPECT_THAT(m, HasSubstr("watchdog: all_reduce #1 (sum of f32[1]"));
    EXPECT_THAT(m, HasSubstr("on the dp group 0 of ranks {0, 1"));
    EXPECT_THAT(m, HasSubstr(absl::StrCat("on global rank ", g.rank(), " (group rank ", g.rank(),
                                          " of ", g.world(), ")")));
    EXPECT_THAT(m, HasSubstr("has not finished after"));
  }
}

// Run only by the CTest entry watchdog_test_abort_np3: it ends the job on purpose.
TEST(WatchdogAbort, DISABLED_RankThatNeverJoins) {
  const ProcessGrid g = world_grid();
  CommOptions opt;
  opt.timeout_s = 2.0;  // default action: print and MPI_Abort
  auto comm = MpiComm::create(MPI_COMM_WORLD, g.dp_group(), g.rank(), opt);
  ASSERT_TRUE(comm.ok()) << comm.status();
  if (g.rank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(100));  // killed by the others' abort
    return;
  }
  Stream s = Stream::cpu();
  float x = 1.0f;
  (*comm)->all_reduce(engine::make_view(&x, DType::kF32, Device::kCpu, {1}), ReduceOp::kSum, s);
  ADD_FAILURE() << "the all-reduce returned although rank 1 never joined";
}

}  // namespace
}  // namespace anvil::parallel
