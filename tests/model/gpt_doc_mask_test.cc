// Megatron's reset_attention_mask + reset_position_ids through the whole model, against a closed
// form: a sample holding two documents [a0 a1 a2 eod | b0 b1 b2 b3] with the document mask and
// restarted positions must give exactly the losses and parameter gradients of the two documents
// run as separate samples (T = 4 each). Without the mask the second document sees the first,
// so the losses differ (the test can fail). CPU in f64, tolerance 1e-12.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

GptConfig tiny_config() {
  GptConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 8;
  c.d_model = 16;
  c.n_heads = 2;
  c.n_layers = 2;
  return c;
}

std::unique_ptr<GptModel> make_model(int64_t seq_len) {
  auto m = GptModel::create(tiny_config(), GptRunShape{1, seq_len},
                            Precision{engine::Device::kCpu, DType::kF64, DType::kF64},
                            /*seed=*/77);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::move(*m);
}

struct Result {
  double loss = 0.0;
  std::vector<double> grads;
};

// Forward + backward (grad_scale 1) of each batch in turn on one model; losses and gradients add.
Result run(int64_t seq_len, const std::vector<GptBatch>& batches) {
  std::unique_ptr<GptModel> m = make_model(seq_len);
  engine::Stream s = engine::Stream::cpu();
  Result r;
  for (const GptBatch& b : batches) {
    m->set_batch(0, 0, b, s);
    m->forward_chunk(0, 0, /*train=*/true, 0, s);
    r.loss += m->loss_sum(0, s);
    m->backward_chunk(0, 0, 1.0f, s);
  }
  r.grads = testing::to_host_f64(m->flat_buffers().grad);
  return r;
}

TEST(GptDocMaskTest, TwoDocumentsEqualTwoSamples) {
  constexpr int32_t kEod = 36;
  const std::vector<int32_t> tokens = {5, 9, 2, kEod, 7, 1, 30, 4};
  const std::vector<int32_t> targets = {9, 2, kEod, 7, 1, 30, 4, 11};
  const std::vector<int32_t> positions = {0, 1, 2, 3, 0, 1, 2, 3};
  const std::vector<int32_t> segments = {0, 0, 0, 0, 1, 1, 1, 1};  // eods before each token
  const std::vector<int32_t> pos4 = {0, 1, 2, 3};

  const Result whole =
      run(8, {GptBatch{tokens.data(), positions.data(), targets.data(), segments.data()}});
  const Result parts =
      run(4, {GptBatch{tokens.data(), pos4.data(), targets.data(), nullptr},
              GptBatch{tokens.data() + 4, pos4.data(), targets.data() + 4, nullptr}});
  EXPECT_NEAR(whole.loss, parts.loss, 1e-12 * std::abs(parts.loss));
  ASSERT_EQ(whole.grads.size(), parts.grads.size());
  double worst = 0.0, norm = 0.0;
  for (size_t i = 0; i < whole.grads.size(); ++i) {
    worst = std::max(worst, std::abs(whole.grads[i] - parts.grads[i]));
    norm += parts.grads[i] * parts.grads[i];
  }
  EXPECT_GT(norm, 1e-6);
  EXPECT_LE(worst, 1e-12);

  // Without the mask the second document attends to the first: a different loss.
  const Result unmasked =
      run(8, {GptBatch{tokens.data(), positions.data(), targets.data(), nullptr}});
  EXPECT_GT(std::abs(unmasked.loss - parts.loss), 1e-6);
}

}  // namespace
}  // namespace anvil::model
