// The fork-layout fixtures (scripts/make_megatron_ds_fixture.py) read by
// io/torch_pt/megatron_ds.h and mapped by model/megatron_ds/names.h equal, bitwise, the
// anvil-layout tensors the script computed with torch from the same state
// (expected.safetensors: master weights, Adam moments; qkv regrouped, padding rows dropped):
// ckpt/ (fp16, ZeRO-1, TP2 x PP2 x DP2), ckpt_bf16/ (BF16_Optimizer, TP1 x PP2 x DP3, with
// alignment padding in the last partitions) and ckpt/global_step3_universal (ds_to_universal.py
// of ckpt/), found from a root's latest / latest_universal or named directly; a universal folder
// in newer DeepSpeed's format (the vocabulary padding stripped, step.pt) written here; refusals.
#include "io/torch_pt/megatron_ds.h"

#include <filesystem>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "io/torch_pt/pt_file.h"
#include "model/megatron_ds/names.h"
#include "tests/io/io_test_util.h"

namespace anvil::model {
namespace {

constexpr char kDir[] = "tests/io/fixtures/megatron_ds/";

// The checkpoint's tensors, mapped to anvil's, equal expected.safetensors bit for bit.
void expect_fixture_tensors(const io::torch_pt::MegatronDsCheckpoint& c) {
  auto mapped = megatron_ds_to_anvil(c.tensors, {c.num_heads, c.vocab});
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  auto want = io::SafetensorsFile::open(std::string(kDir) + "expected.safetensors");
  ASSERT_TRUE(want.ok()) << want.status();
  EXPECT_EQ(mapped->size(), want->tensors().size());
  for (const engine::HostSlice& s : *mapped) {
    auto info = want->info(s.tensor);
    ASSERT_TRUE(info.ok()) << s.tensor;
    EXPECT_EQ(info->shape, s.shape) << s.tensor;
    auto v = want->read_f32(s.tensor);
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(*v, s.data) << s.tensor;
  }
}

TEST(MegatronDs, FixtureImportsToTheExpectedAnvilTensors) {
  auto c = io::torch_pt::read_megatron_ds(std::string(kDir) + "ckpt");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->tp, 2);
  EXPECT_EQ(c->pp, 2);
  EXPECT_EQ(c->dp, 2);
  EXPECT_EQ(c->iteration, 3);
  EXPECT_EQ(c->consumed_samples, 24);
  EXPECT_EQ(c->consumed_tokens, 192);
  EXPECT_EQ(c->vocab, 120);
  EXPECT_EQ(c->padded_vocab, 128);
  EXPECT_EQ(c->lr_scheduler.at("num_steps"), 24);
  EXPECT_EQ(c->loss_scaler.at("cur_scale"), 2048.0);
  EXPECT_EQ(c->layout, "zero");
  EXPECT_EQ(c->adam_step, 3);  // 3 iterations, 1 skipped, + the zero-gradient start step
  expect_fixture_tensors(*c);
}

TEST(MegatronDs, Bf16OptimizerFixtureImportsToTheExpectedAnvilTensors) {
  auto c = io::torch_pt::read_megatron_ds(std::string(kDir) + "ckpt_bf16");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->layout, "bf16_zero");
  EXPECT_EQ(c->tp, 1);
  EXPECT_EQ(c->pp, 2);
  EXPECT_EQ(c->dp, 3);
  EXPECT_EQ(c->iteration, 3);
  EXPECT_EQ(c->consumed_samples, 24);
  EXPECT_EQ(c->adam_step, 4);  // no skipped steps in bf16
  EXPECT_TRUE(c->loss_scaler.empty());
  expect_fixture_tensors(*c);
}

TEST(MegatronDs, UniversalFixtureEqualsTheZeroFolderItCameFrom) {
  auto zero = io::torch_pt::read_megatron_ds(std::string(kDir) + "ckpt");
  ASSERT_TRUE(zero.ok()) << zero.status();
  auto u = io::torch_pt::read_megatron_ds(std::string(kDir) + "ckpt/global_step3_universal");
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->layout, "universal");
  EXPECT_EQ(u->tp, 2);
  EXPECT_EQ(u->pp, 2);
  EXPECT_EQ(u->dp, 2);
  EXPECT_EQ(u->iteration, 3);
  EXPECT_EQ(u->consumed_samples, 24);
  EXPECT_EQ(u->consumed_tokens, 192);
  EXPECT_EQ(u->adam_step, zero->adam_step);  // global_steps - skipped_steps + 1
  EXPECT_EQ(u->lr_scheduler, zero->lr_scheduler);
  EXPECT_TRUE(u->loss_scaler.empty());  // the universal folder keeps no optimizer file
  // Whole tensors, the embedding's padding rows included: the same floats.
  ASSERT_EQ(u->tensors.size(), zero->tensors.size());
  for (const auto& [name, t] : zero->tensors) {
    auto it = u->tensors.find(name);
    ASSERT_NE(it, u->tensors.end()) << name;
    EXPECT_EQ(it->second.shape, t.shape) << name;
    EXPECT_EQ(it->second.data, t.data) << name;
  }
  expect_fixture_tensors(*u);
}

TEST(MegatronDs, FindsTheFolderFromLatestOrLatestUniversal) {
  io::testing::ScratchDir root;
  const std::string fx = std::filesystem::absolute(std::string(kDir) + "ckpt").string();
  std::filesystem::create_directory_symlink(fx + "/global_step3_universal",
                                            root.file("global_step3_universal"));
  io::testing::write_file(root.file("latest_universal"), "global_step3_universal\n");
  auto u = io::torch_pt::read_megatron_ds(root.path());
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->layout, "universal");
  // With both files, `latest` (the original folder) wins.
  std::filesystem::create_directory_symlink(fx + "/global_step3", root.file("global_step3"));
  io::testing::write_file(root.file("latest"), "global_step3");
  auto z = io::torch_pt::read_megatron_ds(root.path());
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_EQ(z->layout, "zero");
  // A tag folder named directly.
  auto t = io::torch_pt::read_megatron_ds(fx + "/global_step3");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->layout, "zero");
}

// Newer DeepSpeed's ds_to_universal.py: the embedding stripped to the original vocabulary
// ("vocab_tensor": True), a step.pt per parameter (a 0-dim float tensor, torch.optim's kind).
TEST(MegatronDs, ReadsNewerDeepSpeedsUniversalFormat) {
  auto zero = io::torch_pt::read_megatron_ds(std::string(kDir) + "ckpt");
  ASSERT_TRUE(zero.ok()) << zero.status();
  io::testing::ScratchDir root;
  const std::string fx = std::string(kDir) + "ckpt/global_step3/";
  for (int mp = 0; mp < 4; ++mp) {
    const std::string f = "mp_rank_0" + std::to_string(mp) + "_model_states.pt";
    std::filesystem::copy_file(fx + f, root.file(f));
  }
  // The fork's pipe-module names back from the whole-tensor names.
  auto pipe_name = [&](const std::string& fork) -> std::string {
    if (absl::StartsWith(fork, "word_embeddings.")) return "tied_modules.embed." + fork;
    if (absl::StartsWith(fork, "final_layernorm.")) return "8." + fork.substr(16);
    const size_t dot = fork.find('.', 7);
    return std::to_string(3 + std::stoi(fork.substr(7, dot - 7))) + fork.substr(dot);
  };
  for (const auto& [name, t] : zero->tensors) {
    const size_t slash = name.find('/');
    const std::string state = name.substr(0, slash), fork = name.substr(slash + 1);
    const std::string dir = root.file("zero/" + pipe_name(fork));
    std::filesystem::create_directories(dir);
    io::torch_pt::PtWriter w;
    auto d = io::torch_pt::Value::make_dict();
    std::vector<int64_t> shape = t.shape;
    std::vector<float> data = t.data;
    if (fork == "word_embeddings.weight") {
      shape[0] = zero->vocab;
      data.resize(zero->vocab * shape[1]);
      d->set("cat_dim", io::torch_pt::Value::integer(0));
      d->set("vocab_tensor", io::torch_pt::Value::boolean(true));
    }
    d->set("param", w.add_f32(shape, data));
    ASSERT_TRUE(w.write(dir + "/" + state + ".pt", *d).ok());
    if (state == "fp32") {
      io::torch_pt::PtWriter ws;
      ASSERT_TRUE(ws.write(dir + "/step.pt", *ws.add_f32({}, {7.0f})).ok());
    }
  }
  auto u = io::torch_pt::read_megatron_ds(root.path());
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_EQ(u->layout, "universal");
  EXPECT_EQ(u->adam_step, 7);
  expect_fixture_tensors(*u);
}

TEST(MegatronDs, RefusesAFolderWithBothOptimizerKinds) {
  io::testing::ScratchDir root;
  const std::string fx = std::filesystem::absolute(std::string(kDir)).string();
  std::filesystem::create_directory(root.file("global_step3"));
  for (const auto& e : std::filesystem::directory_iterator(fx + "/ckpt/global_step3")) {
    std::filesystem::create_symlink(e.path(),
                                    root.file("global_step3/" + e.path().filename().string()));
  }
  std::filesystem::create_symlink(
      fx + "/ckpt_bf16/global_step3/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt",
      root.file("global_step3/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt"));
  io::testing::write_file(root.file("latest"), "global_step3");
  auto c = io::torch_pt::read_megatron_ds(root.path());
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "both zero_pp_rank_*")) << c.status();
}

TEST(MegatronDs, RefusesAFolderWithoutLatest) {
  auto c = io::torch_pt::read_megatron_ds(kDir);
  ASSERT_FALSE(c.ok());
  EXPECT_TRUE(absl::StrContains(c.status().message(), "latest")) << c.status();
}

TEST(MegatronDs, RefusesUnknownTensorNames) {
  std::map<std::string, engine::HostSlice> t;
  t["fp32/layers.0.self_attention.rotary.inv_freq"] = {"x", {2}, {0}, {2}, {1, 2}};
  auto m = megatron_ds_to_anvil(t, {4, 60});
  ASSERT_FALSE(m.ok());
  EXPECT_TRUE(absl::StrContains(m.status().message(), "rotary.inv_freq")) << m.status();
}

}  // namespace
}  // namespace anvil::model
