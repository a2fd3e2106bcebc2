// remove_stale_checkpoint_temps (io/checkpoint_cleanup.h): the temporary directory of a save
// whose process is gone (a child that has exited) is removed with its files, and so is its
// latest.tmp-<pid>; our own, a live process's (the parent of this test), complete checkpoints
// and other names stay.
#include "io/checkpoint_cleanup.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "io/checkpoint.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

namespace fs = std::filesystem;

// The pid of a child that has already exited (and been reaped): no process has it now.
pid_t exited_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
}

TEST(CheckpointCleanupTest, RemovesOnlyTheLeftoversOfGoneProcesses) {
  testing::ScratchDir d;
  const std::string dead = absl::StrCat(exited_pid());
  const std::string own = absl::StrCat(::getpid());
  const std::string live = absl::StrCat(::getppid());
  const std::string stale = checkpoint_tmp_dir(d.path(), 5, dead);
  const std::vector<std::string> kept = {checkpoint_tmp_dir(d.path(), 6, own),
                                         checkpoint_tmp_dir(d.path(), 7, live),
                                         checkpoint_tmp_dir(d.path(), 8, "job42"),
                                         checkpoint_step_dir(d.path(), 4),
                                         d.file("step_00000009.tmp-"),
                                         d.file("notes")};
  fs::create_directories(stale + "/sub");
  testing::write_file(stale + "/sub/rank_00000.safetensors", "partial bytes");
  for (const std::string& k : kept) fs::create_directories(k);
  // `latest` is written through latest.tmp-<pid>: a kill mid-write leaves that file.
  const std::string stale_latest = d.file("latest.tmp-" + dead);
  const std::vector<std::string> kept_files = {d.file("latest.tmp-" + live),
                                               d.file("latest.tmp-" + own), d.file("latest")};
  testing::write_file(stale_latest, "1");
  for (const std::string& k : kept_files) testing::write_file(k, "2\n");

  auto removed = remove_stale_checkpoint_temps(d.path(), own);
  ASSERT_TRUE(removed.ok()) << removed.status();
  std::sort(removed->begin(), removed->end());
  EXPECT_EQ(*removed, (std::vector<std::string>{stale_latest, stale}));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_FALSE(fs::exists(stale_latest));
  for (const std::string& k : kept) EXPECT_TRUE(fs::exists(k)) << k;
  for (const std::string& k : kept_files) EXPECT_TRUE(fs::exists(k)) << k;

  auto again = remove_stale_checkpoint_temps(d.path(), own);
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->empty());
}

TEST(CheckpointCleanupTest, MissingDirectoryIsAnErrorNamingIt) {
  testing::ScratchDir d;
  auto r = remove_stale_checkpoint_temps(d.file("absent"), "1");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(d.file("absent")), std::string::npos);
}

}  // namespace
}  // namespace anvil::io
