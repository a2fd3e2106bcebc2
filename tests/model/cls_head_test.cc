// Tests of the linear classification heads (model/blocks/cls_head.h) and of ClsTask with them
// (model/tasks/finetune_cls.h):
//   - logits equal W h + b computed here (classification and multiple choice);
//   - the head's gradients (W, b and d hidden, with dropout on: the mask is fixed by its
//     Philox counters) equal central finite differences of the loss computed by forward +
//     cls_loss_sum;
//   - through the whole GPT in double (GptModel::set_hidden_head): the gradient of the mean
//     loss w.r.t. model parameters (ln_f, a block weight, an embedding) and the head equals
//     finite differences of ClsTask::evaluate's loss;
//   - a tiny model learns "does the text contain token 7" with a linear head (accuracy > 0.9)
//     and a multiple-choice head picks the choice holding the 7 (> 0.9, chance 0.25);
//   - the head's checkpoint slices load back, and a head of another shape is refused;
//   - the same through a tiny BERT (token types, padding mask, [CLS], the head's pooler);
//   - GPU (skipped without one): the bf16 CUDA model (GPT, and BERT with the pooler head) gives
//     the CPU model's evaluation loss and its first training step's gradient norm within bf16
//     tolerance (2% and 5%).
#include "model/blocks/cls_head.h"

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "engine/memory.h"
#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "model/tasks/finetune_cls.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

std::vector<double> random_doubles(int64_t n, uint64_t seed) {
  const std::vector<float> f = testing::random_uniform(n, seed);
  return std::vector<double>(f.begin(), f.end());
}

TEST(LinearHead, LogitsAreAffineMap) {
  const int64_t d = 5;
  for (int64_t choices : {1, 4}) {
    for (bool pooler : {false, true}) {
      LinearHead head(d, choices > 1 ? 4 : 3, choices, 0.5f, 3, pooler);
      head.values().back() = 0.25f;                  // a bias to see
      if (pooler) head.values()[d * d + 1] = -0.5f;  // and a pooler bias
      const int64_t examples = 2, rows = examples * choices;
      const std::vector<double> h = random_doubles(rows * d, 4);
      const std::vector<double> z = head.forward(h, examples, {});
      ASSERT_EQ(z.size(), static_cast<size_t>(examples * head.classes()));
      const std::vector<float>& v = head.values();
      const int64_t outs = head.outputs(), w0 = pooler ? d * d + d : 0;
      // The classifier's input: h, or tanh(Wp h + bp) with Wp the first d * d values.
      std::vector<double> x = h;
      for (int64_t r = 0; pooler && r < rows; ++r) {
        for (int64_t o = 0; o < d; ++o) {
          double pre = v[d * d + o];
          for (int64_t j = 0; j < d; ++j) pre += v[o * d + j] * h[r * d + j];
          x[r * d + o] = std::tanh(pre);
        }
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t o = 0; o < outs; ++o) {
          double want = v[static_cast<size_t>(w0 + outs * d + o)];
          for (int64_t j = 0; j < d; ++j) want += v[w0 + o * d + j] * x[r * d + j];
          EXPECT_NEAR(z[static_cast<size_t>(r * outs + o)], want, 1e-12) << r << " " << o;
        }
      }
    }
  }
}

TEST(LinearHead, InitIsNormalWithStdAndZeroBias) {
  LinearHead head(256, 4, 1, 0.02f, 9);
  double s = 0.0, s2 = 0.0;
  const int64_t nw = 4 * 256;
  for (int64_t i = 0; i < nw; ++i) {
    s += head.values()[i];
    s2 += static_cast<double>(head.values()[i]) * head.values()[i];
  }
  EXPECT_NEAR(s / nw, 0.0, 0.002);
  EXPECT_NEAR(std::sqrt(s2 / nw), 0.02, 0.002);
  for (int64_t i = nw; i < nw + 4; ++i) EXPECT_EQ(head.values()[i], 0.0f);
}

TEST(LinearHead, GradientsMatchFiniteDifferences) {
  const int64_t d = 6;
  for (int64_t choices : {1, 4}) {
    for (float p : {0.0f, 0.3f}) {
      for (bool pooler : {false, true}) {
        LinearHead head(d, choices > 1 ? 4 : 3, choices, 0.7f, 5, pooler);
        const int64_t examples = 3, rows = examples * choices;
        std::vector<double> h = random_doubles(rows * d, 6);
        const std::vector<int32_t> labels = {0, 2, 1};
        const HeadDropout drop{p, 77};
        const double scale = 0.5;
        auto loss = [&]() { return scale * cls_loss_sum(head.forward(h, examples, drop), labels); };
        std::vector<double> dh(h.size());
        head.zero_grads();
        head.backward(h, head.forward(h, examples, drop), labels, scale, drop, absl::MakeSpan(dh));
        const std::vector<float> g = head.grads();
        for (size_t i = 0; i < head.values().size(); ++i) {
          float& w = head.values()[i];
          const float w0 = w;
          w = w0 + 1e-2f;
          const double up = loss(), step_up = static_cast<double>(w) - w0;
          w = w0 - 1e-2f;
          const double down = loss(), step_down = w0 - static_cast<double>(w);
          w = w0;
          EXPECT_NEAR(g[i], (up - down) / (step_up + step_down), 1e-4)
              << "param " << i << " choices " << choices << " p " << p << " pooler " << pooler;
        }
        int64_t nonzero = 0;
        for (size_t i = 0; i < h.size(); ++i) {
          const double h0 = h[i];
          h[i] = h0 + 1e-5;
          const double up = loss();
          h[i] = h0 - 1e-5;
          const double down = loss();
          h[i] = h0;
          EXPECT_NEAR(dh[i], (up - down) / 2e-5, 1e-7) << "hidden " << i;
          nonzero += dh[i] != 0.0;
        }
        EXPECT_GT(nonzero, static_cast<int64_t>(h.size()) / 2);  // the test sees real gradients
      }
    }
  }
}

TEST(LinearHead, SlicesLoadBackAndShapesAreChecked) {
  LinearHead a(8, 3, 1, 0.1f, 1), b(8, 3, 1, 0.1f, 2), wrong(8, 2, 1, 0.1f, 1);
  std::map<std::string, engine::HostSlice> saved;
  for (const engine::HostSlice& s : a.slices()) saved[s.tensor] = s;
  ASSERT_EQ(saved.at("classifier.weight").shape, (std::vector<int64_t>{3, 8}));
  ASSERT_EQ(saved.at("classifier.bias").shape, (std::vector<int64_t>{3}));
  const TensorLookup lookup = [&](const std::string& n) -> absl::StatusOr<engine::HostSlice> {
    auto it = saved.find(n);
    if (it == saved.end()) return absl::NotFoundError(n);
    return it->second;
  };
  ASSERT_TRUE(b.load(lookup).ok());
  EXPECT_EQ(b.values(), a.values());
  const absl::Status st = wrong.load(lookup).status();
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("classifier.weight [3, 8]"), std::string::npos) << st;
  // A BERT head (with a pooler) from a checkpoint holding only a pretrained pooler: the pooler
  // is loaded, the classifier keeps its fresh init (Megatron's "initializing to random").
  LinearHead pooled(8, 3, 1, 0.1f, 7, /*pooler=*/true), fresh(8, 3, 1, 0.1f, 7, true);
  std::map<std::string, engine::HostSlice> pretrained;
  for (const engine::HostSlice& s : LinearHead(8, 2, 1, 0.1f, 9, true).slices()) {
    if (s.tensor.rfind("pooler.", 0) == 0) pretrained[s.tensor] = s;
  }
  auto names = pooled.load([&](const std::string& n) -> absl::StatusOr<engine::HostSlice> {
    auto it = pretrained.find(n);
    if (it == pretrained.end()) return absl::NotFoundError(n);
    return it->second;
  });
  ASSERT_TRUE(names.ok()) << names.status();
  EXPECT_EQ(*names, (std::vector<std::string>{"pooler.dense.weight", "pooler.dense.bias"}));
  const std::vector<float>& pv = pretrained.at("pooler.dense.weight").data;
  EXPECT_TRUE(std::equal(pv.begin(), pv.end(), pooled.values().begin()));
  EXPECT_TRUE(std::equal(pooled.values().begin() + 72, pooled.values().end(),
                         fresh.values().begin() + 72));  // classifier untouched
}

GptConfig tiny() {
  GptConfig cfg;
  cfg.vocab_size = 29;
  cfg.max_seq_len = 12;
  cfg.d_model = 16;
  cfg.n_heads = 2;
  cfg.n_layers = 2;
  return cfg;
}

// Texts of 3-12 tokens from 3..28 without 7; label 1: one 7 inserted at a random place.
std::vector<ClsExample> contains7(int n, uint64_t seed) {
  std::vector<ClsExample> out;
  const std::vector<int32_t> r = testing::random_ints(n * 16, seed, 0, 1 << 20);
  size_t k = 0;
  for (int i = 0; i < n; ++i) {
    ClsExample e;
    const int len = 3 + r[k++] % 10;
    for (int j = 0; j < len; ++j) {
      const int32_t t = 3 + r[k++] % 26;
      e.tokens.push_back(t == 7 ? 8 : t);
    }
    e.label = i % 2;
    if (e.label == 1) e.tokens[static_cast<size_t>(r[k++] % len)] = 7;
    out.push_back(e);
  }
  return out;
}

// A tiny BERT: post-LN, bidirectional, GELU-erf, token types, embedding LayerNorm.
GptConfig tiny_bert() {
  GptConfig cfg = tiny();
  cfg.causal = false;
  cfg.head = Head::kMlm;
  cfg.norm_placement = NormPlacement::kPost;
  cfg.type_vocab_size = 2;
  cfg.activation = Activation::kGeluErf;
  cfg.embed_layernorm = true;
  return cfg;
}

// Labels i % classes and token types 0 for the first half of each text, 1 for the rest.
std::vector<ClsExample> with_types(std::vector<ClsExample> ex, int classes) {
  for (size_t i = 0; i < ex.size(); ++i) {
    ex[i].label = static_cast<int32_t>(i % static_cast<size_t>(classes));
    ex[i].types.assign(ex[i].tokens.size(), 0);
    for (size_t j = ex[i].tokens.size() / 2; j < ex[i].tokens.size(); ++j) ex[i].types[j] = 1;
  }
  return ex;
}

// Multiple choice over 4 choices: the choice with label 1 of contains7 is the answer.
std::vector<ClsExample> which_has7(int n, uint64_t seed) {
  const std::vector<ClsExample> texts = contains7(8 * n, seed);
  std::vector<ClsExample> out;
  size_t pos = 0, neg = 0;
  for (int i = 0; i < n; ++i) {
    ClsExample e;
    e.label = i % 4;
    for (int c = 0; c < 4; ++c) {
      while (texts[c == e.label ? pos : neg].label != (c == e.label ? 1 : 0)) {
        ++(c == e.label ? pos : neg);
      }
      e.choices.push_back(texts[c == e.label ? pos++ : neg++].tokens);
    }
    out.push_back(e);
  }
  return out;
}

// The model's flat gradient and the head's against central differences of the mean
// evaluation loss, in double.
TEST(ClsTaskLinear, ModelGradientThroughHeadMatchesFiniteDifferences) {
  const GptConfig cfg = tiny();
  const Precision f64{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  engine::Stream s = engine::Stream::cpu();
  for (int64_t choices : {1, 4}) {
    const GptRunShape shape{choices == 1 ? 3 : 4, 12};
    auto m = GptModel::create(cfg, shape, f64, 3);
    ASSERT_TRUE(m.ok()) << m.status();
    (*m)->set_hidden_head(true);
    auto task = ClsTask::create_linear(
        LinearHead(cfg.d_model, choices == 1 ? 3 : 4, choices, 0.5f, 4), cfg.vocab_size, 0);
    ASSERT_TRUE(task.ok()) << task.status();
    std::vector<ClsExample> ex = choices == 1 ? contains7(5, 8) : which_has7(2, 8);
    if (choices == 1) ex[3].label = 2;
    ASSERT_TRUE(task->check(ex).ok());
    // lr 0, no decay: train_step leaves the parameters and keeps the gradients.
    double norm = 0.0;
    task->train_step(**m, shape, ex, {0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1}, 0.0, s, &norm);
    const std::vector<double> grad = testing::to_host_f64((*m)->flat_buffers().grad);
    const std::vector<float> head_grad = task->head()->grads();
    auto mean_loss = [&]() { return task->evaluate(**m, shape, ex, s).loss(); };
    double* values = (*m)->flat_buffers().value.as<double>();
    const ParamTable& table = (*m)->params();
    for (const std::string name : {"ln_f.weight", "ln_f.bias", "h.1.mlp.c_proj.weight",
                                   "h.0.attn.c_attn.weight", "wte.weight"}) {
      const Param& p = *table.find(name);
      for (int64_t k = 0; k < 4; ++k) {
        const int64_t i = p.offset + (k * 7919 + 3 * 29) % p.numel();
        const double v0 = values[i];
        values[i] = v0 + 1e-6;
        const double up = mean_loss();
        values[i] = v0 - 1e-6;
        const double down = mean_loss();
        values[i] = v0;
        const double fd = (up - down) / 2e-6;
        EXPECT_NEAR(grad[static_cast<size_t>(i)], fd, 1e-6 + 1e-5 * std::abs(fd))
            << name << " element " << i - p.offset << " choices " << choices;
      }
    }
    std::vector<float>& hv = task->head()->values();
    for (size_t i = 0; i < hv.size(); i += 5) {
      const float w0 = hv[i];
      hv[i] = w0 + 1e-2f;
      const double up = mean_loss(), su = static_cast<double>(hv[i]) - w0;
      hv[i] = w0 - 1e-2f;
      const double down = mean_loss(), sd = w0 - static_cast<double>(hv[i]);
      hv[i] = w0;
      EXPECT_NEAR(head_grad[i], (up - down) / (su + sd), 1e-4) << "head " << i;
    }
    EXPECT_GT(norm, 0.0);
  }
}

// The same through a BERT (post-LN, bidirectional, token types, the padding mask) classified at
// [CLS] with the head's pooler.
TEST(ClsTaskLinear, BertGradientThroughPoolerHeadMatchesFiniteDifferences) {
  const GptConfig cfg = tiny_bert();
  const Precision f64{engine::Device::kCpu, engine::DType::kF64, engine::DType::kF64};
  engine::Stream s = engine::Stream::cpu();
  const GptRunShape shape{3, 12};
  auto m = GptModel::create(cfg, shape, f64, 3);
  ASSERT_TRUE(m.ok()) << m.status();
  (*m)->set_hidden_head(true);
  auto task = ClsTask::create_linear(LinearHead(cfg.d_model, 3, 1, 0.5f, 4, /*pooler=*/true),
                                     cfg.vocab_size, 0);
  ASSERT_TRUE(task.ok()) << task.status();
  const std::vector<ClsExample> ex = with_types(contains7(5, 8), 3);
  ASSERT_TRUE(task->check(ex).ok());
  double norm = 0.0;
  task->train_step(**m, shape, ex, {0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1}, 0.0, s, &norm);
  const std::vector<double> grad = testing::to_host_f64((*m)->flat_buffers().grad);
  const std::vector<float> head_grad = task->head()->grads();
  auto mean_loss = [&]() { return task->evaluate(**m, shape, ex, s).loss(); };
  double* values = (*m)->flat_buffers().value.as<double>();
  int64_t checked = 0;
  for (const Param& p : (*m)->params().all()) {
    for (int64_t k = 0; k < 2; ++k) {
      const int64_t i = p.offset + (k * 7919 + 31) % p.numel();
      const double v0 = values[i];
      values[i] = v0 + 1e-6;
      const double up = mean_loss();
      values[i] = v0 - 1e-6;
      const double down = mean_loss();
      values[i] = v0;
      const double fd = (up - down) / 2e-6;
      EXPECT_NEAR(grad[static_cast<size_t>(i)], fd, 1e-6 + 1e-5 * std::abs(fd))
          << p.name << " element " << i - p.offset;
      checked += fd != 0.0;
    }
  }
  EXPECT_GT(checked, 10);  // token types, positions, layers: real gradients
  std::vector<float>& hv = task->head()->values();
  for (size_t i = 0; i < hv.size(); i += 7) {
    const float w0 = hv[i];
    hv[i] = w0 + 1e-2f;
    const double up = mean_loss(), su = static_cast<double>(hv[i]) - w0;
    hv[i] = w0 - 1e-2f;
    const double down = mean_loss(), sd = w0 - static_cast<double>(hv[i]);
    hv[i] = w0;
    EXPECT_NEAR(head_grad[i], (up - down) / (su + sd), 1e-4) << "head " << i;
  }
}

TEST(ClsTaskLinear, LearnsContainsSevenAndWhichHasSeven) {
  engine::Stream s = engine::Stream::cpu();
  for (int64_t choices : {1, 4}) {
    GptConfig cfg = tiny();
    cfg.d_model = 32;
    cfg.n_heads = 4;
    const GptRunShape shape{8, 12};
    auto m = GptModel::create(cfg, shape, {}, 5);
    ASSERT_TRUE(m.ok());
    (*m)->set_hidden_head(true);
    auto task = ClsTask::create_linear(
        LinearHead(cfg.d_model, choices == 1 ? 2 : 4, choices, 0.02f, 5), cfg.vocab_size, 0);
    ASSERT_TRUE(task.ok());
    const std::vector<ClsExample> train = choices == 1 ? contains7(512, 1) : which_has7(256, 1);
    const std::vector<ClsExample> dev = choices == 1 ? contains7(200, 2) : which_has7(100, 2);
    double first = 0.0, last = 0.0;
    const int64_t batch = 16 / choices;  // two micro-batches (of 8 sequences) per step
    for (int step = 1; step <= 200; ++step) {
      const size_t at = static_cast<size_t>((step - 1) * batch) % train.size();
      double norm = 0.0;
      last = task->train_step(**m, shape, absl::MakeConstSpan(train).subspan(at, batch),
                              {3e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, step}, 1.0, s, &norm);
      ASSERT_TRUE(std::isfinite(norm) && norm > 0.0);
      if (step == 1) first = last;
    }
    const ClsResult after = task->evaluate(**m, shape, dev, s);
    EXPECT_LT(last, first) << "choices " << choices;
    EXPECT_GT(after.accuracy(), 0.9) << "choices " << choices;
    EXPECT_EQ(after.total, static_cast<int64_t>(dev.size()));
  }
}

TEST(ClsTaskLinear, Errors) {
  auto task = ClsTask::create_linear(LinearHead(8, 4, 4, 0.02f, 1), 29, 0);
  ASSERT_TRUE(task.ok());
  std::vector<ClsExample> ex = which_has7(2, 3);
  EXPECT_TRUE(task->check(ex).ok());
  ex[1].choices.pop_back();
  EXPECT_NE(task->check(ex).message().find("example 1 has 3 choices"), std::string::npos);
  ex = which_has7(2, 3);
  ex[0].choices[2].clear();
  EXPECT_NE(task->check(ex).message().find("example 0 has no tokens"), std::string::npos);
  EXPECT_FALSE(ClsTask::create_linear(LinearHead(8, 2, 1, 0.02f, 1), 29, 29).ok());
}

TEST(ClsTaskLinearGpu, CudaMatchesCpu) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (bool bert : {false, true}) {
    SCOPED_TRACE(bert ? "BERT, pooler" : "GPT");
    GptConfig cfg = bert ? tiny_bert() : tiny();
    // BERT on CUDA attends through flash attention, which needs head_dim 64 or 128.
    cfg.d_model = 128;
    const GptRunShape shape{4, 12};
    auto cuda = engine::Stream::cuda(0);
    ASSERT_TRUE(cuda.ok()) << cuda.status();
    engine::Stream cpu = engine::Stream::cpu();
    const std::vector<ClsExample> ex = with_types(contains7(8, 11), 2);
    double loss[2], norm[2];
    for (int dev = 0; dev < 2; ++dev) {
      const Precision prec =
          dev == 0 ? Precision{}
                   : Precision{engine::Device::kCuda, engine::DType::kBF16, engine::DType::kF32};
      engine::Stream& s = dev == 0 ? cpu : *cuda;
      auto m = GptModel::create(cfg, shape, prec, 3);
      ASSERT_TRUE(m.ok()) << m.status();
      (*m)->set_hidden_head(true);
      // Outputs poisoned first: a head or backward that skips rows cannot pass on stale values.
      engine::poison((*m)->final_hidden_grad(), s);
      auto task =
          ClsTask::create_linear(LinearHead(cfg.d_model, 2, 1, 0.5f, 4, bert), cfg.vocab_size, 0);
      ASSERT_TRUE(task.ok());
      loss[dev] = task->evaluate(**m, shape, ex, s).loss();
      task->train_step(**m, shape, ex, {0.0f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 1}, 0.0, s,
                       &norm[dev]);
      ASSERT_TRUE(std::isfinite(loss[dev]) && std::isfinite(norm[dev])) << dev;
    }
    EXPECT_NEAR(loss[1], loss[0], 0.02 * loss[0]);
    EXPECT_NEAR(norm[1], norm[0], 0.05 * norm[0]);
  }
}

}  // namespace
}  // namespace anvil::model::blocks
