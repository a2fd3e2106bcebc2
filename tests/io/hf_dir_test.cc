// read_hf_tensors (io/hf_dir.h): the shards a model.safetensors.index.json names are read from
// the model directory only; a shard path that leads out of it (.., an absolute path, a symbolic
// link) is refused by name even when the file it reaches exists and is a valid safetensors file.
#include "io/hf_dir.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "tests/io/io_test_util.h"

namespace anvil::io {
namespace {

using testing::ScratchDir;
using testing::write_file;

void write_tensor(const std::string& path, const std::string& name, float value) {
  const std::vector<float> v(4, value);
  ASSERT_TRUE(write_safetensors(path, {{name, StDType::kF32, {4}, v.data()}}, {}).ok());
}

void write_index(const std::string& dir, const std::string& shard) {
  write_file(dir + "/model.safetensors.index.json",
             R"({"weight_map": {"a": "a.safetensors", "b": ")" + shard + R"("}})");
}

class HfDirShards : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(::mkdir(model_dir().c_str(), 0755), 0);
    ASSERT_EQ(::mkdir((model_dir() + "/sub").c_str(), 0755), 0);
    write_tensor(model_dir() + "/a.safetensors", "a", 1.0f);
    write_tensor(model_dir() + "/sub/b.safetensors", "b", 2.0f);
    write_tensor(root_.file("outside.safetensors"), "b", 3.0f);  // valid, but not the model's
  }
  std::string model_dir() const { return root_.file("model"); }
  void expect_refused(const std::string& shard) {
    write_index(model_dir(), shard);
    auto t = read_hf_tensors(model_dir());
    ASSERT_FALSE(t.ok()) << shard << " was read";
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument) << t.status();
    EXPECT_NE(t.status().message().find("the shard \"" + shard + "\" of tensor b is outside"),
              std::string::npos)
        << t.status();
  }
  ScratchDir root_;
};

TEST_F(HfDirShards, ShardsInsideTheDirectoryAreRead) {
  write_index(model_dir(), "sub/b.safetensors");
  auto t = read_hf_tensors(model_dir());
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->size(), 2u);
  EXPECT_EQ((*t)[1].tensor, "b");
  EXPECT_EQ((*t)[1].data[0], 2.0f);
}

TEST_F(HfDirShards, ParentComponentsAreRefused) {
  expect_refused("../outside.safetensors");
  expect_refused("sub/../../outside.safetensors");
}

TEST_F(HfDirShards, AbsolutePathsAreRefused) { expect_refused(root_.file("outside.safetensors")); }

TEST_F(HfDirShards, SymbolicLinksOutAreRefused) {
  ASSERT_EQ(::symlink(root_.file("outside.safetensors").c_str(),
                      (model_dir() + "/link.safetensors").c_str()),
            0);
  expect_refused("link.safetensors");
  ASSERT_EQ(::symlink(root_.path().c_str(), (model_dir() + "/up").c_str()), 0);
  expect_refused("up/outside.safetensors");
}

}  // namespace
}  // namespace anvil::io
