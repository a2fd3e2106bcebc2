// model_tensor_shapes / check_model_tensors (model/model_tensors.h): the logical tensors of a
// 2-layer GPT (shapes written out by hand from GPT-2's layout) and the refusal of a set that is
// not exactly them: a missing tensor, an extra layer, a transposed weight, each named.
#include "model/train/model_tensors.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace anvil::model {
namespace {

using engine::HostSlice;

TrainConfig two_layers() {
  TrainConfig c;
  c.model.vocab_size = 96;
  c.model.max_seq_len = 16;
  c.model.d_model = 32;
  c.model.n_heads = 4;
  c.model.n_layers = 2;
  return c;
}

std::vector<HostSlice> tensors_of(const TrainConfig& cfg) {
  std::vector<HostSlice> out;
  for (const auto& [name, shape] : model_tensor_shapes(cfg)) {
    out.push_back(HostSlice{name, shape, std::vector<int64_t>(shape.size(), 0), shape, {}});
  }
  return out;
}

TEST(ModelTensorsTest, GptShapes) {
  const auto shapes = model_tensor_shapes(two_layers());
  EXPECT_EQ(shapes.size(), 4u + 2u * 12u);  // wte, wpe, ln_f (2); 12 per layer
  EXPECT_EQ(shapes.at("wte.weight"), (std::vector<int64_t>{96, 32}));  // no padding rows
  EXPECT_EQ(shapes.at("wpe.weight"), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shapes.at("h.1.attn.c_attn.weight"), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(shapes.at("h.1.mlp.c_fc.weight"), (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(shapes.at("h.1.mlp.c_proj.weight"), (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(shapes.at("ln_f.bias"), (std::vector<int64_t>{32}));
  EXPECT_EQ(shapes.count("h.2.ln_1.weight"), 0u);
}

TEST(ModelTensorsTest, ExactlyTheModelsTensorsPass) {
  EXPECT_TRUE(check_model_tensors(two_layers(), tensors_of(two_layers()), "c.json").ok());
}

TEST(ModelTensorsTest, MoreLayersThanStoredNamesTheMissingTensor) {
  TrainConfig three = two_layers();
  three.model.n_layers = 3;
  const absl::Status s = check_model_tensors(three, tensors_of(two_layers()), "c.json");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("missing tensor h.2.attn.c_attn.bias [96]: the model of 3 layers "
                             "that c.json describes has it"),
            std::string::npos)
      << s;
}

TEST(ModelTensorsTest, FewerLayersThanStoredNamesTheExtraTensor) {
  TrainConfig one = two_layers();
  one.model.n_layers = 1;
  const absl::Status s = check_model_tensors(one, tensors_of(two_layers()), "c.json");
  EXPECT_NE(s.message().find("tensor h.1.attn.c_attn.bias [96] is not part of the model of 1 "
                             "layer that c.json"),
            std::string::npos)
      << s;
}

TEST(ModelTensorsTest, ATransposedWeightIsNamed) {
  std::vector<HostSlice> t = tensors_of(two_layers());
  for (HostSlice& x : t) {
    if (x.tensor == "h.0.mlp.c_fc.weight") x.shape = {32, 128};
  }
  const absl::Status s = check_model_tensors(two_layers(), t, "c.json");
  EXPECT_NE(s.message().find("tensor h.0.mlp.c_fc.weight has shape [32, 128], the model of 2 "
                             "layers that c.json describes needs [128, 32]"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace anvil::model
