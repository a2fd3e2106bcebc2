// GPT-2 model gradient check on the CPU in double: the analytic gradient of the mean token loss
// (backward with grad_scale = 1 / counted tokens) against central finite differences, for every
// coordinate of every parameter of a tiny model (vocab 37 padded to 128, d 8, 2 heads,
// 2 layers, B 2, T 5), for GPT-2 and for each architecture option (bias, tie_embeddings,
// position_embedding none / alibi / rotary, embed_layernorm, rmsnorm, the GLU activations and
// the BLOOM and LLaMA mixes). Also: backward twice doubles
// the gradients, the memory plan equals the arenas, and with dropout on (fixed offset, so fixed
// masks) the check still passes.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "engine/config.h"
#include "engine/stream.h"
#include "gtest/gtest.h"
#include "model/stack/gpt.h"
#include "model/train/family.h"
#include "model/train/train_config.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model {
namespace {

using engine::DType;

struct Batch {
  std::vector<int32_t> tokens, positions, targets;
  int64_t counted = 0;
};

GptConfig tiny_config() {
  GptConfig c;
  c.vocab_size = 37;
  c.max_seq_len = 7;
  c.d_model = 8;
  c.n_heads = 2;
  c.n_layers = 2;
  return c;
}

constexpr GptRunShape kShape{2, 5};

Batch make_batch(const GptConfig& cfg, const GptRunShape& shape, uint64_t seed) {
  Batch b;
  const int64_t n = shape.micro_batch * shape.seq_len;
  b.tokens = testing::random_ints(n, seed, 0, static_cast<int32_t>(cfg.vocab_size));
  b.targets = testing::random_ints(n, seed + 1, 0, static_cast<int32_t>(cfg.vocab_size));
  b.targets[3] = -1;  // one ignored token
  for (int64_t i = 0; i < n; ++i) {
    b.positions.push_back(static_cast<int32_t>(i % shape.seq_len));
    if (b.targets[i] >= 0) ++b.counted;
  }
  return b;
}

std::unique_ptr<GptModel> make_model(const GptConfig& cfg, bool save_dropout_mask = true) {
  Precision prec{engine::Device::kCpu, DType::kF64, DType::kF64};
  prec.save_dropout_mask = save_dropout_mask;
  auto m = GptModel::create(cfg, kShape, prec, /*seed=*/1234);
  EXPECT_TRUE(m.ok()) << m.status();
  // Replace the GPT-2 init (tiny weights, zero biases) with O(1) random values so every path
  // carries a sizable, nonlinear signal; LN gammas stay near 1.
  uint64_t seed = 99;
  for (Param& p : (*m)->params().all()) {
    std::vector<float> r = testing::random_uniform(p.numel(), seed++, -0.5f, 0.5f);
    const bool gamma = (p.name.find("ln_") != std::string::npos || p.name == "wte_ln.weight") &&
                       p.name.find(".weight") != std::string::npos;
    double* v = p.value.as<double>();
    for (int64_t i = 0; i < p.numel(); ++i) v[i] = gamma ? 1.0 + 0.5 * r[i] : r[i];
  }
  return std::move(m).value();
}

double mean_loss(GptModel& m, const Batch& b, engine::Stream& s, uint64_t dropout_offset) {
  m.forward(b.tokens.data(), b.positions.data(), b.targets.data(), /*train=*/true, dropout_offset,
            s);
  return m.loss_sum(s) / static_cast<double>(b.counted);
}

// Analytic gradients of every parameter vs central differences; at most `max_coords` random
// coordinates per parameter (all when it has fewer).
void check_gradients(const GptConfig& cfg, int64_t max_coords) {
  std::unique_ptr<GptModel> m = make_model(cfg);
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(cfg, kShape, 7);
  constexpr uint64_t kOffset = 5;
  m->zero_grads(s);
  mean_loss(*m, b, s, kOffset);
  m->backward(1.0f / static_cast<float>(b.counted), s);

  constexpr double kH = 1e-5;
  double grad_sq = 0.0;
  for (Param& p : m->params().all()) {
    const int64_t n = p.numel();
    std::vector<int64_t> coords;
    if (n <= max_coords) {
      for (int64_t i = 0; i < n; ++i) coords.push_back(i);
    } else {
      for (int32_t i : testing::random_ints(max_coords, p.offset, 0, static_cast<int32_t>(n))) {
        coords.push_back(i);
      }
    }
    double* v = p.value.as<double>();
    const double* g = p.grad.as<double>();
    std::vector<double> got, ref;
    for (int64_t i : coords) {
      const double x0 = v[i];
      v[i] = x0 + kH;
      const double lp = mean_loss(*m, b, s, kOffset);
      v[i] = x0 - kH;
      const double lm = mean_loss(*m, b, s, kOffset);
      v[i] = x0;
      ref.push_back((lp - lm) / (2 * kH));
      got.push_back(g[i]);
      grad_sq += g[i] * g[i];
    }
    // Padded wte rows (>= vocab) never get a gradient: allow an all-zero subset there.
    EXPECT_TRUE(testing::tensors_near(got, ref, {1e-8, 1e-5, 1e-9}, p.vocab_rows)) << p.name;
  }
  EXPECT_GT(grad_sq, 1e-6);
}

TEST(GptGrad, AllParametersMatchFiniteDifferences) { check_gradients(tiny_config(), 1 << 30); }

TEST(GptGrad, WithDropoutFixedMasks) {
  GptConfig cfg = tiny_config();
  cfg.hidden_dropout = 0.2f;
  cfg.attention_dropout = 0.25f;
  check_gradients(cfg, 8);
}

// [train] attention_dropout_mask: the backward reading the forward's saved keep bits and the
// backward drawing them again from Philox give the same loss and gradients, bit for bit; only
// the saving run has the bits in its memory plan.
TEST(GptGrad, SavedAndRegeneratedDropoutMasksAgree) {
  GptConfig cfg = tiny_config();
  cfg.attention_dropout = 0.3f;
  const Batch b = make_batch(cfg, kShape, 13);
  engine::Stream s = engine::Stream::cpu();
  std::vector<double> loss;
  std::vector<std::vector<double>> grads;
  for (bool save : {true, false}) {
    std::unique_ptr<GptModel> m = make_model(cfg, save);
    m->zero_grads(s);
    loss.push_back(mean_loss(*m, b, s, /*dropout_offset=*/3));
    m->backward(1.0f / static_cast<float>(b.counted), s);
    std::vector<double> g;
    for (Param& p : m->params().all()) {
      g.insert(g.end(), p.grad.as<double>(), p.grad.as<double>() + p.numel());
    }
    grads.push_back(g);
    Precision prec{engine::Device::kCpu, DType::kF64, DType::kF64};
    prec.save_dropout_mask = save;
    auto plan = GptModel::plan(cfg, kShape, prec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    bool has_keep = false;
    for (const auto& e : plan->entries()) has_keep |= e.name.find("attn.keep") != std::string::npos;
    EXPECT_EQ(has_keep, save);
  }
  EXPECT_EQ(loss[0], loss[1]);
  EXPECT_EQ(grads[0], grads[1]);
  double sq = 0;
  for (double x : grads[0]) sq += x * x;
  EXPECT_GT(sq, 0.0);
}

TEST(GptGrad, BackwardTwiceDoubles) {
  std::unique_ptr<GptModel> m = make_model(tiny_config());
  engine::Stream s = engine::Stream::cpu();
  const Batch b = make_batch(tiny_config(), kShape, 11);
  m->zero_grads(s);
  mean_loss(*m, b, s, 0);
  m->backward(0.1f, s);
  std::vector<std::vector<double>> once;
  for (const Param& p : m->params().all()) once.push_back(testing::to_host_f64(p.grad));
  m->backward(0.1f, s);
  size_t k = 0;
  for (const Param& p : m->params().all()) {
    std::vector<double> twice = testing::to_host_f64(p.grad), want = once[k++];
    for (double& x : want) x *= 2.0;
    // Exact up to the summation order of ops that accumulate several terms (e.g. wte gets the
    // LM head and the embedding gradient).
    EXPECT_TRUE(testing::tensors_near(twice, want, {1e-15, 1e-12, 1e-20}, true)) << p.name;
  }
}

TEST(GptGrad, PlanEqualsArenas) {
  for (DType dt : {DType::kF32, DType::kF64}) {
    Precision prec{engine::Device::kCpu, dt, dt};
    auto plan = GptModel::plan(tiny_config(), kShape, prec);
    ASSERT_TRUE(plan.ok()) << plan.status();
    auto m = GptModel::create(tiny_config(), kShape, prec, 1);
    ASSERT_TRUE(m.ok()) << m.status();
    for (const std::string& cat : plan->categories()) {
      EXPECT_EQ(plan->category_bytes(cat), (*m)->arena_bytes(cat)) << cat;
    }
    EXPECT_EQ(plan->category_bytes("master"), 0u);  // the compute copy is the master
    EXPECT_EQ(plan->total_bytes(), (*m)->arena_bytes());
  }
}

TEST(GptGrad, ParamTableLayout) {
  const GptConfig cfg = tiny_config();
  auto m = GptModel::create(cfg, kShape, {engine::Device::kCpu, DType::kF32, DType::kF32}, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  ParamTable& t = (*m)->params();
  EXPECT_EQ(t.numel(), cfg.total_params());
  ASSERT_NE(t.find("h.1.mlp.c_fc.weight"), nullptr);
  EXPECT_EQ(t.find("h.1.mlp.c_fc.weight")->shape, (std::vector<int64_t>{32, 8}));
  EXPECT_EQ(t.find("wte.weight")->shape, (std::vector<int64_t>{128, 8}));
  for (const Param& p : t.all()) {
    const bool decay =
        p.name.find(".weight") != std::string::npos && p.name.find("ln_") == std::string::npos;
    EXPECT_EQ(p.weight_decay, decay) << p.name;
    // Inside its bucket the decay group comes first.
    for (const ParamTable::Bucket& b : t.buckets()) {
      if (p.offset >= b.begin && p.offset < b.end) {
        EXPECT_EQ(p.offset < b.decay_end, decay) << p.name;
      }
    }
    EXPECT_EQ(p.offset % ParamTable::kAlignElements, 0) << p.name;
    EXPECT_EQ(p.value.data, p.master.data) << p.name;
  }
  // GPT-2 init: LN gamma 1, biases 0, padded wte rows 0, N(0, 0.02) weights.
  EXPECT_EQ(t.find("h.0.ln_1.weight")->value.as<float>()[3], 1.0f);
  EXPECT_EQ(t.find("h.0.attn.c_attn.bias")->value.as<float>()[3], 0.0f);
  const float* wte = t.find("wte.weight")->value.as<float>();
  EXPECT_EQ(wte[cfg.vocab_size * cfg.d_model + 5], 0.0f);
  double sq = 0;
  for (int64_t i = 0; i < cfg.vocab_size * cfg.d_model; ++i) sq += wte[i] * wte[i];
  EXPECT_NEAR(std::sqrt(sq / (cfg.vocab_size * cfg.d_model)), 0.02, 0.003);
}

TEST(GptGrad, ConfigValidation) {
  GptConfig c = tiny_config();
  EXPECT_TRUE(c.validate().ok());
  c.n_heads = 3;
  EXPECT_FALSE(c.validate().ok());
  c = tiny_config();
  c.padded_vocab = 32;
  EXPECT_FALSE(c.validate().ok());
  EXPECT_FALSE(GptModel::plan(tiny_config(), {2, 8}, {}).ok());  // seq_len > max_seq_len
  // 16-bit activations need f32 gradients (the CPU emulates bf16/f16 storage).
  EXPECT_FALSE(
      GptModel::plan(tiny_config(), kShape, {engine::Device::kCpu, DType::kF16, DType::kF16}).ok());
  EXPECT_TRUE(
      GptModel::plan(tiny_config(), kShape, {engine::Device::kCpu, DType::kF16, DType::kF32}).ok());
  // GPT-2 small: 124M parameters with the vocabulary padded to 50304.
  GptConfig gpt2;
  EXPECT_EQ(gpt2.padded(), 50304);
  EXPECT_EQ(gpt2.total_params(), 124475904);
  EXPECT_EQ(gpt2.matmul_params(), 12 * 12 * 768 * 768 + 50304 * 768);
}

// Architecture variants (docs/models.md): each option alone, then BLOOM's and LLaMA's mixes.
struct Variant {
  const char* name;
  void (*set)(GptConfig&);
};

const Variant kVariants[] = {
    {"NoBias", [](GptConfig& c) { c.bias = false; }},
    {"Untied", [](GptConfig& c) { c.tie_embeddings = false; }},
    {"NoPositions", [](GptConfig& c) { c.position_embedding = PositionEmbedding::kNone; }},
    {"Alibi", [](GptConfig& c) { c.position_embedding = PositionEmbedding::kAlibi; }},
    {"EmbedLayerNorm",
     [](GptConfig& c) {
       c.position_embedding = PositionEmbedding::kNone;
       c.embed_layernorm = true;
     }},
    {"Bloom",
     [](GptConfig& c) {
       c.position_embedding = PositionEmbedding::kAlibi;
       c.embed_layernorm = true;
     }},
    {"UntiedNoBiasAlibi",
     [](GptConfig& c) {
       c.position_embedding = PositionEmbedding::kAlibi;
       c.bias = false;
       c.tie_embeddings = false;
     }},
    {"RmsNorm", [](GptConfig& c) { c.norm = Norm::kRmsNorm; }},
    {"Swiglu", [](GptConfig& c) { c.activation = Activation::kSwiglu; }},
    {"Geglu", [](GptConfig& c) { c.activation = Activation::kGeglu; }},
    {"Reglu", [](GptConfig& c) { c.activation = Activation::kReglu; }},
    {"LigluNoBias",
     [](GptConfig& c) {
       c.activation = Activation::kLiglu;
       c.bias = false;
     }},
    {"Rotary",
     [](GptConfig& c) {
       c.position_embedding = PositionEmbedding::kRotary;
       c.rotary_base = 100.0f;  // short period: the 5 positions see distinct angles
     }},
    {"RotaryHalf",
     [](GptConfig& c) {
       c.position_embedding = PositionEmbedding::kRotary;
       c.rotary_percent = 0.5f;
     }},
    {"Llama",
     [](GptConfig& c) {
       c.norm = Norm::kRmsNorm;
       c.activation = Activation::kSwiglu;
       c.position_embedding = PositionEmbedding::kRotary;
       c.bias = false;
       c.tie_embeddings = false;
       c.ffn_hidden = 12;
     }},
    // Qwen2: a bias on c_attn alone, on one kv head (multi-query), llama3 rope scaling with a
    // short original context so the 5 positions see scaled, interpolated and kept frequencies.
    {"QwenQkvBiasMqaLlama3Rope",
     [](GptConfig& c) {
       c.norm = Norm::kRmsNorm;
       c.activation = Activation::kSwiglu;
       c.position_embedding = PositionEmbedding::kRotary;
       c.rotary_base = 100.0f;
       c.rope_scaling.type = ops::RotaryScalingType::kLlama3;
       c.rope_scaling.factor = 3.0f;
       c.rope_scaling.original_max_position = 8;
       c.bias = false;
       c.qkv_bias = true;
       c.n_kv_heads = 1;
       c.tie_embeddings = false;
       c.ffn_hidden = 12;
     }},
    {"RotaryLinearScaling",
     [](GptConfig& c) {
       c.position_embedding = PositionEmbedding::kRotary;
       c.rotary_base = 100.0f;
       c.rope_scaling.type = ops::RotaryScalingType::kLinear;
       c.rope_scaling.factor = 0.5f;
     }},
};

class GptGradVariant : public ::testing::TestWithParam<Variant> {
 protected:
  GptConfig config() const {
    GptConfig c = tiny_config();
    GetParam().set(c);
    return c;
  }
};

TEST_P(GptGradVariant, AllParametersMatchFiniteDifferences) { check_gradients(config(), 1 << 30); }

TEST_P(GptGradVariant, WithDropoutFixedMasks) {
  GptConfig cfg = config();
  cfg.hidden_dropout = 0.2f;
  cfg.attention_dropout = 0.25f;
  check_gradients(cfg, 8);
}

// The table has exactly the option's tensors, total_params() counts them, the plan is what
// create() allocates, and the init follows Megatron (norm gammas 1, lm_head N(0, init_std)).
TEST_P(GptGradVariant, ParamTableAndInit) {
  const GptConfig cfg = config();
  const Precision prec{engine::Device::kCpu, DType::kF32, DType::kF32};
  auto plan = GptModel::plan(cfg, kShape, prec);
  ASSERT_TRUE(plan.ok()) << plan.status();
  auto m = GptModel::create(cfg, kShape, prec, 1);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(plan->total_bytes(), (*m)->arena_bytes());
  const ParamTable& t = (*m)->params();
  EXPECT_EQ(t.numel(), cfg.total_params());
  EXPECT_EQ(t.find("wpe.weight") != nullptr, cfg.learned_positions());
  EXPECT_EQ(t.find("wte_ln.weight") != nullptr, cfg.embed_layernorm);
  EXPECT_EQ(t.find("wte_ln.bias") != nullptr, cfg.embed_layernorm);
  EXPECT_EQ(t.find("lm_head.weight") != nullptr, !cfg.tie_embeddings);
  EXPECT_EQ(t.find("h.1.mlp.c_fc.bias") != nullptr, cfg.bias);
  EXPECT_EQ(t.find("h.0.attn.c_attn.bias") != nullptr, cfg.bias || cfg.qkv_bias);
  EXPECT_EQ(t.find("h.0.attn.c_proj.bias") != nullptr, cfg.bias);
  EXPECT_EQ(t.find("h.1.mlp.c_proj.bias") != nullptr, cfg.bias);
  EXPECT_EQ(t.find("h.1.ln_2.bias") != nullptr, cfg.layernorm());
  EXPECT_EQ(t.find("ln_f.bias") != nullptr, cfg.layernorm());
  EXPECT_EQ(t.find("h.1.ln_2.weight")->value.as<float>()[2], 1.0f);
  EXPECT_EQ(t.find("ln_f.weight")->value.as<float>()[2], 1.0f);
  // GLU: [g | u] rows, twice ffn, split over TP as two parts.
  const Param& fc = *t.find("h.1.mlp.c_fc.weight");
  EXPECT_EQ(fc.shape, (std::vector<int64_t>{cfg.glu() ? 2 * cfg.ffn() : cfg.ffn(), 8}));
  EXPECT_EQ(fc.tp_parts, cfg.glu() ? 2 : 1);
  EXPECT_EQ(t.find("h.1.mlp.c_proj.weight")->shape, (std::vector<int64_t>{8, cfg.ffn()}));
  EXPECT_TRUE(t.find("wte.weight")->vocab_rows);
  EXPECT_EQ(t.find("wte.weight")->tied, cfg.tie_embeddings);
  if (cfg.embed_layernorm) {
    EXPECT_EQ(t.find("wte_ln.weight")->value.as<float>()[5], 1.0f);
    EXPECT_EQ(t.find("wte_ln.bias")->value.as<float>()[5], 0.0f);
  }
  if (!cfg.tie_embeddings) {
    const Param& head = *t.find("lm_head.weight");
    EXPECT_TRUE(head.vocab_rows);
    EXPECT_EQ(head.shape, (std::vector<int64_t>{128, 8}));
    const float* w = head.value.as<float>();
    EXPECT_EQ(w[cfg.vocab_size * cfg.d_model + 3], 0.0f);  // padding row
    double sq = 0;
    for (int64_t i = 0; i < cfg.vocab_size * cfg.d_model; ++i) sq += w[i] * w[i];
    EXPECT_NEAR(std::sqrt(sq / (cfg.vocab_size * cfg.d_model)), 0.02, 0.003);
    // Not a copy of wte.
    EXPECT_NE(w[7], t.find("wte.weight")->value.as<float>()[7]);
  }
}

INSTANTIATE_TEST_SUITE_P(Options, GptGradVariant, ::testing::ValuesIn(kVariants),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

// Options that cannot run are refused up front, naming the option.
TEST(GptGrad, VariantValidation) {
  GptConfig c = tiny_config();
  c.embed_layernorm = true;  // with learned positions: the GPT family's rule (BERT's is the sum's)
  absl::StatusOr<engine::Config> raw =
      engine::Config::load_string("[model]\ntype = gpt\n", "gpt.ini", train_config_schema());
  ASSERT_TRUE(raw.ok()) << raw.status();
  const absl::Status e = (*find_family("gpt"))->model_features(*raw, c);
  EXPECT_NE(e.message().find("embed_layernorm"), std::string::npos) << e;
  c = tiny_config();
  c.position_embedding = PositionEmbedding::kAlibi;
  // CUDA f32 runs the unfused attention, which has no ALiBi.
  const absl::Status s =
      GptModel::plan(c, kShape, {engine::Device::kCuda, DType::kF32, DType::kF32}).status();
  EXPECT_NE(s.message().find("alibi"), std::string::npos) << s;
  c.position_embedding = PositionEmbedding::kRotary;
  const absl::Status r =
      GptModel::plan(c, kShape, {engine::Device::kCuda, DType::kF32, DType::kF32}).status();
  EXPECT_NE(r.message().find("rotary"), std::string::npos) << r;
  c.rotary_percent = 0.25f;  // head_dim 4: rot_dim 1 is odd
  EXPECT_NE(c.validate().message().find("rotary"), std::string::npos) << c.validate();
}

// The position options change the function: with the same weights, learned-free models with
// ALiBi, rotary and no position information give three different losses, each position-aware
// one different from the causal-mask-only model.
TEST(GptGrad, PositionOptionsDiffer) {
  std::vector<double> losses;
  for (PositionEmbedding p :
       {PositionEmbedding::kNone, PositionEmbedding::kAlibi, PositionEmbedding::kRotary}) {
    GptConfig c = tiny_config();
    c.position_embedding = p;
    std::unique_ptr<GptModel> m = make_model(c);
    engine::Stream s = engine::Stream::cpu();
    losses.push_back(mean_loss(*m, make_batch(c, kShape, 7), s, 0));
  }
  EXPECT_GT(std::abs(losses[1] - losses[0]), 1e-6);
  EXPECT_GT(std::abs(losses[2] - losses[0]), 1e-6);
  EXPECT_GT(std::abs(losses[2] - losses[1]), 1e-6);
}

}  // namespace
}  // namespace anvil::model
