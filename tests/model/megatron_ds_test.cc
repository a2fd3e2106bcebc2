// The fork-layout fixture (TP2 x PP2 x DP2, ZeRO-1; scripts/make_megatron_ds_fixture.py) read
// by io/torch_pt/megatron_ds.h and mapped by model/megatron_ds/names.h equals, bitwise, the
// anvil-layout tensors the script computed with torch from the same state
// (expected.safetensors: master weights, Adam moments; qkv regrouped, padding rows dropped).
#include "io/torch_pt/megatron_ds.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "model/megatron_ds/names.h"

namespace anvil::model {
namespace {

constexpr char kDir[] = "tests/io/fixtures/megatron_ds/";

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
  auto mapped = megatron_ds_to_anvil(c->tensors, {c->num_heads, c->vocab});
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
