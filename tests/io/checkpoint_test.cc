// Checkpoint directories: pieces written by two ranks assemble into whole tensors; the manifest
// keeps the run state; `latest` names the newest; keep_last prunes; a truncated file, a
// flipped byte or a missing file is refused naming the file and the previous checkpoint is
// used; a leftover temporary directory (a save killed midway) is ignored.
#include "io/checkpoint.h"

#include <sys/resource.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using engine::HostSlice;
using testing::read_file;
using testing::ScratchDir;
using testing::write_file;

CheckpointInfo info_at(int64_t step) {
  CheckpointInfo info;
  info.step = step;
  info.config = "[train]\nsteps = 10\n";
  info.state = {{"consumed_samples", step * 8}};
  info.layout = {{"tp", 2}};
  info.lr_schedule = {{"lr", 0.5}};
  return info;
}

// A [3, 4] tensor w = 10 * row + col, split into column halves (rank 0: cols 0-1, rank 1: 2-3),
// and a [5] vector b = 100 + i written by rank 1 whole. `bias` shifts every value.
std::vector<HostSlice> rank_slices(int rank, float bias) {
  std::vector<HostSlice> out;
  HostSlice w{"master/w", {3, 4}, {0, 2 * rank}, {3, 2}, {}};
  for (int r = 0; r < 3; ++r) {
    for (int c = 0; c < 2; ++c)
      w.data.push_back(bias + 10.0f * r + static_cast<float>(2 * rank + c));
  }
  out.push_back(w);
  if (rank == 1) out.push_back(HostSlice{"master/b", {5}, {0}, {5}, {100, 101, 102, 103, 104}});
  return out;
}

absl::Status save_two_ranks(const std::string& dir, int64_t step, float bias, int64_t keep) {
  const std::string tmp = checkpoint_tmp_dir(dir, step, "t");
  if (absl::Status s = begin_checkpoint(dir, step, "t"); !s.ok()) return s;
  for (int r = 0; r < 2; ++r) {
    if (absl::Status s = write_checkpoint_shard(tmp, r, rank_slices(r, bias)); !s.ok()) return s;
  }
  return finish_checkpoint(dir, tmp, 2, info_at(step), keep);
}

std::vector<std::string> warnings_of(const std::string& dir, int64_t step, int64_t* got_step) {
  std::vector<std::string> warnings;
  auto c = open_newest_complete(dir, step, [&](const std::string& w) { warnings.push_back(w); });
  *got_step = c.ok() ? c->info().step : -1;
  return warnings;
}

TEST(CheckpointTest, AssemblesPiecesAndKeepsTheState) {
  ScratchDir dir;
  ASSERT_TRUE(save_two_ranks(dir.path(), 5, 0.0f, 0).ok());
  EXPECT_EQ(read_file(dir.file("latest")), "5\n");
  auto c = Checkpoint::open(checkpoint_step_dir(dir.path(), 5));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->info().step, 5);
  EXPECT_EQ(c->info().config, "[train]\nsteps = 10\n");
  EXPECT_EQ(c->info().state.at("consumed_samples"), 40);
  EXPECT_EQ(c->info().layout.at("tp"), 2);
  EXPECT_EQ(c->info().lr_schedule.at("lr"), 0.5);
  EXPECT_EQ(c->tensor_names(), (std::vector<std::string>{"master/b", "master/w"}));
  auto w = c->read("master/w");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->shape, (std::vector<int64_t>{3, 4}));
  for (int i = 0; i < 12; ++i) EXPECT_EQ(w->data[i], 10.0f * (i / 4) + (i % 4)) << i;
  auto b = c->read("master/b");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->data, (std::vector<float>{100, 101, 102, 103, 104}));
  EXPECT_EQ(c->read("master/none").status().code(), absl::StatusCode::kNotFound);
}

TEST(CheckpointTest, AttachmentsAreCopiedAndChecked) {
  ScratchDir dir;
  write_file(dir.file("vocab.json"), "{\"a\": 0}");
  CheckpointInfo info = info_at(2);
  info.attachments = {{"tokenizer/vocab.json", dir.file("vocab.json")}};
  ASSERT_TRUE(save_checkpoint(dir.file("ck"), info, rank_slices(1, 0.0f), 0).ok());
  const std::string copy = checkpoint_step_dir(dir.file("ck"), 2) + "/tokenizer/vocab.json";
  auto c = Checkpoint::open(checkpoint_step_dir(dir.file("ck"), 2));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->info().attachments.at("tokenizer/vocab.json"), copy);
  EXPECT_EQ(read_file(copy), "{\"a\": 0}");
  write_file(copy, "{\"a\": 1}");
  EXPECT_NE(Checkpoint::open(checkpoint_step_dir(dir.file("ck"), 2)).status().message().find(copy),
            std::string::npos);
}

TEST(CheckpointTest, UncoveredTensorIsAnError) {
  ScratchDir dir;
  std::vector<HostSlice> half = rank_slices(0, 0.0f);  // rank 0's columns only
  ASSERT_TRUE(save_checkpoint(dir.path(), info_at(1), half, 0).ok());
  auto c = Checkpoint::open(checkpoint_step_dir(dir.path(), 1));
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(c->read("master/w").status().message().find("do not cover"), std::string::npos);
}

TEST(CheckpointTest, KeepLastPrunesOlderOnes) {
  ScratchDir dir;
  for (int64_t step : {2, 4, 6}) ASSERT_TRUE(save_two_ranks(dir.path(), step, 0.0f, 2).ok());
  EXPECT_EQ(list_checkpoint_steps(dir.path()), (std::vector<int64_t>{4, 6}));
  EXPECT_EQ(read_file(dir.file("latest")), "6\n");
}

TEST(CheckpointTest, CorruptCheckpointFallsBackToThePreviousOne) {
  ScratchDir dir;
  ASSERT_TRUE(save_two_ranks(dir.path(), 3, 0.0f, 0).ok());
  ASSERT_TRUE(save_two_ranks(dir.path(), 6, 1.0f, 0).ok());
  // A save killed midway leaves a temporary directory: never a candidate.
  ASSERT_TRUE(begin_checkpoint(dir.path(), 9, "dead").ok());
  int64_t got = -1;
  EXPECT_TRUE(warnings_of(dir.path(), -1, &got).empty());
  EXPECT_EQ(got, 6);

  const std::string file = checkpoint_step_dir(dir.path(), 6) + "/rank_00001.safetensors";
  const std::string good = read_file(file);
  std::string flipped = good;
  flipped[flipped.size() - 3] ^= 0x10;
  for (const std::string& bad : {flipped, good.substr(0, good.size() - 8)}) {
    write_file(file, bad);
    const std::vector<std::string> w = warnings_of(dir.path(), -1, &got);
    EXPECT_EQ(got, 3);
    ASSERT_EQ(w.size(), 2u);
    EXPECT_NE(w[0].find(file), std::string::npos) << w[0];
    EXPECT_NE(w[1].find("step_00000003"), std::string::npos) << w[1];
  }
  ASSERT_EQ(std::remove(file.c_str()), 0);
  const std::vector<std::string> w = warnings_of(dir.path(), -1, &got);
  EXPECT_EQ(got, 3);
  ASSERT_FALSE(w.empty());
  EXPECT_NE(w[0].find("missing"), std::string::npos) << w[0];

  // Nothing loadable left: an error, not "no checkpoint" (which would start from scratch).
  const std::string manifest = checkpoint_step_dir(dir.path(), 3) + "/manifest.json";
  write_file(manifest, "{");
  auto none = open_newest_complete(dir.path(), -1, [](const std::string&) {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kDataLoss) << none.status();
}

// A step the user names is that step or an error naming the steps there, never an older one
// (only "latest" falls back).
TEST(CheckpointTest, AnExplicitStepIsThatStepOrAnError) {
  ScratchDir dir;
  ASSERT_TRUE(save_two_ranks(dir.path(), 2, 0.0f, 0).ok());
  ASSERT_TRUE(save_two_ranks(dir.path(), 4, 1.0f, 0).ok());
  int64_t got = -1;
  EXPECT_TRUE(warnings_of(dir.path(), 2, &got).empty());
  EXPECT_EQ(got, 2);

  auto missing = open_newest_complete(dir.path(), 5, [](const std::string&) {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << missing.status();
  EXPECT_NE(missing.status().message().find("step_00000005 does not exist"), std::string::npos)
      << missing.status();
  EXPECT_NE(missing.status().message().find("at steps 2, 4"), std::string::npos)
      << missing.status();

  const std::string file = checkpoint_step_dir(dir.path(), 4) + "/rank_00001.safetensors";
  write_file(file, "broken");
  auto broken = open_newest_complete(dir.path(), 4, [](const std::string&) {});
  EXPECT_EQ(broken.status().code(), absl::StatusCode::kDataLoss) << broken.status();
  EXPECT_NE(broken.status().message().find(file), std::string::npos) << broken.status();

  ScratchDir empty;
  auto none = open_newest_complete(empty.path(), 5, [](const std::string&) {});
  EXPECT_EQ(none.status().code(), absl::StatusCode::kInvalidArgument) << none.status();
  EXPECT_NE(none.status().message().find("no complete checkpoint"), std::string::npos)
      << none.status();
}

// A manifest whose shape would wrap the element count around int64 is refused at open.
TEST(CheckpointTest, RefusesAManifestShapeThatOverflows) {
  ScratchDir dir;
  ASSERT_TRUE(save_two_ranks(dir.path(), 1, 0.0f, 0).ok());
  const std::string manifest = checkpoint_step_dir(dir.path(), 1) + "/manifest.json";
  nlohmann::json m = nlohmann::json::parse(read_file(manifest));
  m["tensors"]["master/w"]["shape"] = {int64_t{4611686018427387952}, 4};
  write_file(manifest, m.dump());
  auto c = Checkpoint::open(checkpoint_step_dir(dir.path(), 1));
  EXPECT_EQ(c.status().code(), absl::StatusCode::kDataLoss) << c.status();
  EXPECT_NE(c.status().message().find("tensor master/w: shape [4611686018427387952,4]"),
            std::string::npos)
      << c.status();
}

// The entries of `dir` (names).
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A save that fails (here: files limited to 16 KiB, as a full disk would) removes its
// temporary directory; retries do not pile them up, and earlier checkpoints stay.
TEST(CheckpointTest, AFailedSaveLeavesNoTemporaries) {
  ScratchDir dir;
  ASSERT_TRUE(save_two_ranks(dir.path(), 1, 0.0f, 0).ok());
  std::vector<HostSlice> big = {HostSlice{"master/w", {64, 256}, {0, 0}, {64, 256}, {}}};
  big[0].data.assign(64 * 256, 1.0f);  // 64 KiB
  struct rlimit old_limit;
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  const sighandler_t old_handler = std::signal(SIGXFSZ, SIG_IGN);  // EFBIG instead of a signal
  struct rlimit small = old_limit;
  small.rlim_cur = 16 << 10;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
  absl::Status s1 = save_checkpoint(dir.path(), info_at(2), big, 0);
  absl::Status s2 = save_checkpoint(dir.path(), info_at(3), big, 0);
  ::setrlimit(RLIMIT_FSIZE, &old_limit);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_FALSE(s1.ok());
  EXPECT_FALSE(s2.ok());
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"latest", "step_00000001"}));
  EXPECT_EQ(read_file(dir.file("latest")), "1\n");

  // finish_checkpoint failing (a rank's list missing) removes the directory too.
  const std::string tmp = checkpoint_tmp_dir(dir.path(), 4, "t");
  ASSERT_TRUE(begin_checkpoint(dir.path(), 4, "t").ok());
  ASSERT_TRUE(write_checkpoint_shard(tmp, 0, rank_slices(0, 0.0f)).ok());
  EXPECT_FALSE(finish_checkpoint(dir.path(), tmp, 2, info_at(4), 0).ok());
  EXPECT_EQ(entries(dir.path()), (std::vector<std::string>{"latest", "step_00000001"}));
}

TEST(CheckpointTest, NothingToLoad) {
  ScratchDir dir;
  auto c = open_newest_complete(dir.path(), -1, [](const std::string&) {});
  EXPECT_EQ(c.status().code(), absl::StatusCode::kNotFound) << c.status();
}

}  // namespace
}  // namespace anvil::io
