// run_forked_ranks: fork, redirect each child's output to a file, wait with a deadline.
#include "tests/testing/fork_ranks.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "gtest/gtest.h"

namespace anvil::testing {

std::vector<RankResult> run_forked_ranks(int world, double timeout_s,
                                         const std::function<void(int rank)>& body) {
  std::vector<pid_t> pids(static_cast<size_t>(world), -1);
  std::vector<std::string> logs(static_cast<size_t>(world));
  std::fflush(stdout);
  std::fflush(stderr);
  for (int r = 0; r < world; ++r) {
    char path[] = "/tmp/anvil_rank_XXXXXX";
    const int fd = ::mkstemp(path);
    logs[static_cast<size_t>(r)] = path;
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
      body(r);
      std::fflush(stdout);
      std::fflush(stderr);
      ::_exit(::testing::Test::HasFailure() ? 1 : 0);
    }
    ::close(fd);
    pids[static_cast<size_t>(r)] = pid;
  }
  std::vector<RankResult> out(static_cast<size_t>(world));
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_s));
  int left = world;
  while (left > 0) {
    for (int r = 0; r < world; ++r) {
      pid_t& pid = pids[static_cast<size_t>(r)];
      if (pid < 0) continue;
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) != pid) continue;
      RankResult& res = out[static_cast<size_t>(r)];
      if (WIFEXITED(status)) res.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) res.signal = WTERMSIG(status);
      pid = -1;
      --left;
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (pid_t& pid : pids) {
        if (pid < 0) continue;
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        pid = -1;
      }
      ADD_FAILURE() << "ranks still running after " << timeout_s << " s were killed (a hang)";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < world; ++r) {
    std::ifstream in(logs[static_cast<size_t>(r)]);
    std::stringstream ss;
    ss << in.rdbuf();
    out[static_cast<size_t>(r)].output = ss.str();
    std::remove(logs[static_cast<size_t>(r)].c_str());
  }
  return out;
}

void expect_all_ranks_passed(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    EXPECT_TRUE(results[r].exit_code == 0 && results[r].signal == 0)
        << "rank " << r << " exited " << results[r].exit_code << " (signal " << results[r].signal
        << "); its output:\n"
        << results[r].output;
  }
}

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace anvil::testing
