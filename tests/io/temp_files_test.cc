// io/temp_files: temporary names carry host and pid; remove_stale_temps removes exactly the
// temporaries of the given path that a dead process of this host left (new and older names),
// and keeps live processes', other hosts' and other files'; DeferredSignals holds termination
// signals until the last section ends, then they act as before.
#include "io/temp_files.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using testing::file_exists;
using testing::ScratchDir;
using ::testing::UnorderedElementsAre;
using testing::write_file;

// The pid of a process that has exited (and been reaped).
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof(buf) - 1);
  return buf;
}

TEST(TempFiles, TempPathNamesHostAndPid) {
  EXPECT_EQ(temp_path("d/x.bin"), "d/x.bin.tmp." + host() + "." + std::to_string(::getpid()));
}

TEST(TempFiles, RemovesOnlyStaleTemporariesOfThePath) {
  ScratchDir dir;
  const std::string path = dir.file("x.bin");
  const std::string dead = std::to_string(dead_pid());
  const std::string live = std::to_string(::getpid());
  const std::string stale_new = path + ".tmp." + host() + "." + dead;
  const std::string stale_counter = path + ".tmp." + host() + "." + dead + ".3";
  const std::string stale_old = path + ".tmp." + dead;  // before host names
  const std::string kept[] = {
      path,                                        // the output itself
      temp_path(path),                             // this (live) process
      path + ".tmp.other-host." + dead,            // another node's: its pid means nothing here
      dir.file("y.bin.tmp." + dead),               // another output's
      path + ".tmp." + host() + "." + dead + "x",  // not a temporary name
  };
  for (const std::string& p : {stale_new, stale_counter, stale_old}) write_file(p, "t");
  for (const std::string& p : kept) write_file(p, "k");
  auto removed = remove_stale_temps(path);
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_THAT(*removed, UnorderedElementsAre(stale_new, stale_counter, stale_old));
  for (const std::string& p : {stale_new, stale_counter, stale_old}) EXPECT_FALSE(file_exists(p));
  for (const std::string& p : kept) EXPECT_TRUE(file_exists(p)) << p;
  // Nothing left to remove; a missing directory is no error.
  EXPECT_TRUE(remove_stale_temps(path)->empty());
  EXPECT_TRUE(remove_stale_temps(dir.file("no/such/dir/x.bin"))->empty());
}

std::atomic<int> g_received{0};
extern "C" void on_test_signal(int sig) { g_received.store(sig); }

TEST(DeferredSignals, HoldsSignalsUntilTheLastOneEnds) {
  struct sigaction action = {}, previous;
  action.sa_handler = on_test_signal;
  sigemptyset(&action.sa_mask);
  ASSERT_EQ(::sigaction(SIGTERM, &action, &previous), 0);
  {
    const DeferredSignals outer;
    {
      const DeferredSignals inner;  // nested (another thread's section, say)
      ::raise(SIGTERM);
    }
    EXPECT_EQ(g_received.load(), 0) << "delivered while a section was open";
  }
  EXPECT_EQ(g_received.load(), SIGTERM) << "not delivered to the program's handler at the end";
  ::raise(SIGTERM);  // the program's handler is back
  EXPECT_EQ(g_received.load(), SIGTERM);
  ::sigaction(SIGTERM, &previous, nullptr);
}

TEST(DeferredSignalsDeathTest, DefaultActionAfterTheSection) {
  EXPECT_EXIT(
      {
        {
          const DeferredSignals defer;
          ::raise(SIGINT);
          std::fputs("still running\n", stderr);  // the temporaries would be cleaned up here
        }
        std::fputs("after the section\n", stderr);
      },
      ::testing::KilledBySignal(SIGINT), "still running\n$");
}

}  // namespace
}  // namespace anvil::io
