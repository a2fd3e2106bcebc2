// The GPT-2 Hugging Face table: names gain and lose "transformer.", Conv1D weights (and only
// they) are transposed, the tied LM head and the causal-mask buffers are not imported; a
// model_type without a table is refused naming the supported ones; transpose_2d.
#include "model/checkpoint_hf.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::model {
namespace {

TEST(CheckpointHfTest, Gpt2Names) {
  const HfFamily& f = gpt2_hf_family();
  EXPECT_EQ(to_hf_name(f, "h.3.mlp.c_fc.weight"), "transformer.h.3.mlp.c_fc.weight");
  EXPECT_EQ(from_hf_name(f, "transformer.wte.weight"), "wte.weight");
  EXPECT_EQ(from_hf_name(f, "h.0.attn.c_attn.bias"), "h.0.attn.c_attn.bias");  // hub layout
  EXPECT_EQ(from_hf_name(f, "lm_head.weight"), std::nullopt);
  EXPECT_EQ(from_hf_name(f, "h.0.attn.bias"), std::nullopt);
  EXPECT_EQ(from_hf_name(f, "transformer.h.11.attn.masked_bias"), std::nullopt);
  for (const char* w : {"h.0.attn.c_attn.weight", "h.1.attn.c_proj.weight", "h.2.mlp.c_fc.weight",
                        "h.3.mlp.c_proj.weight"}) {
    EXPECT_TRUE(hf_transposed(f, w)) << w;
  }
  for (const char* w : {"wte.weight", "wpe.weight", "h.0.attn.c_attn.bias", "ln_f.weight"}) {
    EXPECT_FALSE(hf_transposed(f, w)) << w;
  }
  EXPECT_EQ(hf_family("gpt2").value(), &f);
  EXPECT_NE(hf_family("bert").status().message().find("supported: gpt2"), std::string::npos);
}

TEST(CheckpointHfTest, Transpose) {
  const engine::HostSlice t{"x", {2, 3}, {0, 0}, {2, 3}, {1, 2, 3, 4, 5, 6}};
  const engine::HostSlice u = transpose_2d(t);
  EXPECT_EQ(u.shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(u.extent, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(u.data, (std::vector<float>{1, 4, 2, 5, 3, 6}));
  const engine::HostSlice b{"b", {3}, {0}, {3}, {1, 2, 3}};
  EXPECT_EQ(transpose_2d(b).data, b.data);
}

}  // namespace
}  // namespace anvil::model
