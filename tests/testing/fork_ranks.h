// Multi-process tests without a launcher: run a body in N forked processes (one per rank) and
// collect each one's exit status and output. The TCP backend's tests (tcp_store_test,
// tcp_comm_test) use it to stand in for torchrun, which starts N copies of a binary with
// RANK / WORLD_SIZE / MASTER_ADDR / MASTER_PORT set.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace anvil::testing {

struct RankResult {
  int exit_code = -1;  // the body's: 0 when its gtest assertions passed, 1 when one failed
  int signal = 0;      // the signal that ended the process (SIGABRT after an abort), else 0
  std::string output;  // what the process wrote to stdout and stderr
};

// Forks `world` processes; process r runs body(r), then exits 0, or 1 when one of the body's
// gtest assertions failed (a child's failures are printed into its output). Processes still
// running after timeout_s are killed (SIGKILL). Call before the test starts any thread.
std::vector<RankResult> run_forked_ranks(int world, double timeout_s,
                                         const std::function<void(int rank)>& body);

// Expects every rank to have exited 0; prints the output of those that did not.
void expect_all_ranks_passed(const std::vector<RankResult>& results);

// A TCP port that was free a moment ago (bound to port 0, then released).
int free_tcp_port();

}  // namespace anvil::testing
