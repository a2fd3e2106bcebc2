// A model family registered from tests/ (issue 22 item 7): a one-layer encoder classifier built
// from model/blocks/ (mean-pooled token embeddings x [B, d], one residual MLP block
// h = x + mlp(x) (blocks/mlp.h), a linear head logits = h W^T + b (blocks/linear.h), softmax
// cross-entropy against the sample's class) registered as [model] type "toy" on the process's
// family registry (model/train/family.h) and trained on the CPU through the shared trainer
// (model/train/trainer.h) with the registry's create and plan: its loss falls on a learnable
// task (is the sample's majority of tokens in the lower half of the vocabulary?), and the
// gradient the trainer's step applies matches a central difference of the toy's loss.
// Sample record: tokens[T] | class[1].
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/arena.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "model/blocks/linear.h"
#include "model/blocks/mlp.h"
#include "model/model.h"
#include "model/param_table.h"
#include "model/train/family.h"
#include "model/train/trainer.h"

namespace anvil::model {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;

constexpr int64_t kVocab = 16, kDim = 16, kFfn = 32, kClasses = 2;

TensorView host_view(float* p, std::initializer_list<int64_t> shape) {
  return engine::make_view(p, DType::kF32, Device::kCpu, shape);
}

// The toy classifier as the trainer's Model: one pipeline stage, one activation slot, f32 on
// the CPU, every parameter in one flat buffer of a ParamTable.
class ToyModel : public Model {
 public:
  explicit ToyModel(const TrainConfig& cfg) : B_(cfg.train.micro_batch), T_(cfg.data.seq_len) {
    ParamTableBuilder b;
    b.begin_bucket("toy");
    b.add("wte.weight", {kVocab, kDim}, true);
    b.add("mlp.w_in", {kFfn, kDim}, true);
    b.add("mlp.b_in", {kFfn}, false);
    b.add("mlp.w_out", {kDim, kFfn}, true);
    b.add("mlp.b_out", {kDim}, false);
    b.add("head.weight", {kClasses, kDim}, true);
    b.add("head.bias", {kClasses}, false);
    table_ = b.build();
    const size_t n = static_cast<size_t>(table_.flat_numel());
    value_.assign(n, 0.0f);
    grad_.assign(n, 0.0f);
    m_.assign(n, 0.0f);
    v_.assign(n, 0.0f);
    auto flat = [n](std::vector<float>& f) {
      return engine::make_view(f.data(), DType::kF32, Device::kCpu, {static_cast<int64_t>(n)});
    };
    table_.bind(flat(value_), flat(value_), flat(grad_), flat(m_), flat(v_));
    // Deterministic small weights (an LCG), biases 0.
    uint64_t state = cfg.train.seed;
    for (Param& p : table_.all()) {
      if (!p.weight_decay) continue;
      float* w = p.master.as<float>();
      for (int64_t i = 0; i < p.numel(); ++i) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        w[i] = (static_cast<float>(state >> 40) / static_cast<float>(1 << 24) - 0.5f) * 0.4f;
      }
    }
    mlp_.d_model = kDim;
    mlp_.ffn = kFfn;
    mlp_.activation = blocks::MlpActivation::kGeluTanh;
    mlp_.bias = true;
    const size_t rows = static_cast<size_t>(B_);
    x_.assign(rows * kDim, 0.0f);
    y_.assign(rows * kDim, 0.0f);
    h_.assign(rows * kDim, 0.0f);
    pre_.assign(rows * kFfn, 0.0f);
    act_.assign(rows * kFfn, 0.0f);
    dpre_.assign(rows * kFfn, 0.0f);
    probs_.assign(rows * kClasses, 0.0f);
    dlogits_.assign(rows * kClasses, 0.0f);
    dh_.assign(rows * kDim, 0.0f);
    dx_.assign(rows * kDim, 0.0f);
  }

  // PipelineStage: the whole model, one activation set.
  int64_t slots() const override { return 1; }
  int64_t chunks() const override { return 1; }
  bool ends_model() const override { return true; }
  void forward(int64_t, int64_t, int64_t micro_batch, bool, uint64_t, engine::Stream& s) override {
    m_now_ = micro_batch;
    const int32_t* tok = &tokens_[static_cast<size_t>(micro_batch * B_ * T_)];
    const float* wte = param("wte.weight").master.as<float>();
    for (int64_t b = 0; b < B_; ++b) {  // x = the mean of the sample's token embeddings
      for (int64_t k = 0; k < kDim; ++k) x_[b * kDim + k] = 0.0f;
      for (int64_t t = 0; t < T_; ++t) {
        for (int64_t k = 0; k < kDim; ++k) x_[b * kDim + k] += wte[tok[b * T_ + t] * kDim + k];
      }
      for (int64_t k = 0; k < kDim; ++k) x_[b * kDim + k] /= static_cast<float>(T_);
    }
    blocks::mlp_forward(mlp_, host_view(y_.data(), {B_, kDim}), acts(),
                        host_view(x_.data(), {B_, kDim}), weights(false), false, {}, s);
    for (size_t i = 0; i < h_.size(); ++i) h_[i] = x_[i] + y_[i];
    std::vector<float> logits(static_cast<size_t>(B_ * kClasses));
    blocks::linear(host_view(logits.data(), {B_, kClasses}), host_view(h_.data(), {B_, kDim}),
                   param("head.weight").master, param("head.bias").master, s);
    loss_ = 0.0;
    for (int64_t b = 0; b < B_; ++b) {
      const float* z = &logits[static_cast<size_t>(b * kClasses)];
      const float top = std::max(z[0], z[1]);
      double sum = 0.0;
      for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(static_cast<double>(z[c] - top));
      for (int64_t c = 0; c < kClasses; ++c) {
        probs_[b * kClasses + c] = static_cast<float>(std::exp(z[c] - top) / sum);
      }
      loss_ -= std::log(static_cast<double>(probs_[b * kClasses + label(micro_batch, b)]));
    }
  }
  void backward(int64_t, int64_t, float grad_scale, engine::Stream& s) override {
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t c = 0; c < kClasses; ++c) {
        const float target = c == label(m_now_, b) ? 1.0f : 0.0f;
        dlogits_[b * kClasses + c] = (probs_[b * kClasses + c] - target) * grad_scale;
      }
    }
    const auto dlogits = host_view(dlogits_.data(), {B_, kClasses});
    blocks::weight_bias_grad(param("head.weight").grad, param("head.bias").grad, dlogits,
                             host_view(h_.data(), {B_, kDim}), s);
    blocks::input_grad(host_view(dh_.data(), {B_, kDim}), dlogits, param("head.weight").master, s);
    blocks::MlpScratch scratch;
    scratch.dpre = host_view(dpre_.data(), {B_, kFfn});
    blocks::mlp_backward(mlp_, host_view(dx_.data(), {B_, kDim}), weights(true),
                         host_view(dh_.data(), {B_, kDim}), host_view(x_.data(), {B_, kDim}),
                         acts(), weights(false), {}, scratch, s);
    float* dwte = param("wte.weight").grad.as<float>();
    const int32_t* tok = &tokens_[static_cast<size_t>(m_now_ * B_ * T_)];
    for (int64_t b = 0; b < B_; ++b) {  // d x = d h (residual) + the MLP's; spread over T
      for (int64_t t = 0; t < T_; ++t) {
        for (int64_t k = 0; k < kDim; ++k) {
          dwte[tok[b * T_ + t] * kDim + k] +=
              (dx_[b * kDim + k] + dh_[b * kDim + k]) / static_cast<float>(T_);
        }
      }
    }
  }
  double loss_sum(int64_t, engine::Stream&) override { return loss_; }
  std::vector<TensorView> sent_activations(int64_t) override { return {}; }
  std::vector<TensorView> received_activations(int64_t, int64_t) override { return {}; }
  std::vector<TensorView> sent_grads(int64_t) override { return {}; }
  std::vector<TensorView> received_grads(int64_t, int64_t) override { return {}; }

  // Model.
  ParamTable& params() override { return table_; }
  size_t arena_bytes() const override { return 4 * value_.size() * sizeof(float); }
  int64_t load_micro_batch(const SampleFn& samples, int64_t first_index, int64_t m) override {
    const size_t need = static_cast<size_t>((m + 1) * B_);
    if (labels_.size() < need) {
      labels_.resize(need);
      tokens_.resize(need * static_cast<size_t>(T_));
    }
    std::vector<int32_t> record(static_cast<size_t>(T_ + 1));
    for (int64_t b = 0; b < B_; ++b) {
      samples(first_index + b, record.data());
      for (int64_t t = 0; t < T_; ++t) tokens_[(m * B_ + b) * T_ + t] = record[t];
      labels_[m * B_ + b] = record[T_];
    }
    return B_;  // one counted target per sample
  }
  void set_counted_tokens(int64_t) override {}
  bool per_micro_batch_mean() const override { return true; }
  int64_t tokens_per_sample() const override { return T_; }
  double flops_per_token() const override { return 6.0 * (2 * kDim * kFfn) / T_; }
  void zero_grads(engine::Stream&) override { std::fill(grad_.begin(), grad_.end(), 0.0f); }
  void set_overlap_grad_sync(bool) override {}
  void finish_backward(engine::Stream&) override {}
  void sum_shared_grads(engine::Stream&) override {}
  void reduce_gradients(engine::Stream&) override {}
  double grad_sum_squares(engine::Stream&) override {
    double ss = 0.0;
    for (float g : grad_) ss += static_cast<double>(g) * g;
    return ss;
  }
  bool grad_squares_over_tp() const override { return false; }
  bool zero_sharded() const override { return false; }
  void optimizer_step(const OptimizerStep& o, engine::Stream&) override {
    const double c1 = 1.0 - std::pow(o.beta1, static_cast<double>(o.step));
    const double c2 = 1.0 - std::pow(o.beta2, static_cast<double>(o.step));
    for (Param& p : table_.all()) {
      float *w = p.master.as<float>(), *g = p.grad.as<float>(), *m = p.m.as<float>(),
            *v = p.v.as<float>();
      for (int64_t i = 0; i < p.numel(); ++i) {
        const float gi = g[i] * o.grad_scale;
        m[i] = o.beta1 * m[i] + (1.0f - o.beta1) * gi;
        v[i] = o.beta2 * v[i] + (1.0f - o.beta2) * gi * gi;
        const double update = (m[i] / c1) / (std::sqrt(v[i] / c2) + o.eps);
        w[i] -=
            static_cast<float>(o.lr * (update + (p.weight_decay ? o.weight_decay * w[i] : 0.0)));
      }
    }
  }
  std::vector<engine::HostSlice> checkpoint_slices(int, engine::Stream&) override { return {}; }
  absl::Status load_checkpoint(const TensorLookup&, bool, engine::Stream&) override {
    return absl::UnimplementedError("the toy family keeps no checkpoints");
  }

  const std::vector<float>& grads() const { return grad_; }
  std::vector<float>& values() { return value_; }

 private:
  Param& param(const std::string& name) { return *table_.find(name); }
  int32_t label(int64_t m, int64_t b) const { return labels_[static_cast<size_t>(m * B_ + b)]; }
  blocks::MlpActs acts() {
    return {host_view(pre_.data(), {B_, kFfn}), host_view(act_.data(), {B_, kFfn})};
  }
  blocks::MlpWeights weights(bool grads) {
    auto pick = [&](const char* n) { return grads ? param(n).grad : param(n).master; };
    return {pick("mlp.w_in"), pick("mlp.b_in"), pick("mlp.w_out"), pick("mlp.b_out")};
  }

  int64_t B_, T_, m_now_ = 0;
  ParamTable table_;
  std::vector<float> value_, grad_, m_, v_;
  blocks::MlpConfig mlp_;
  std::vector<float> x_, y_, h_, pre_, act_, dpre_, probs_, dlogits_, dh_, dx_;
  std::vector<int32_t> tokens_, labels_;
  double loss_ = 0.0;
};

// The toy's registry entry.
Family toy_family() {
  Family f;
  f.type = "toy";
  f.title = "Toy";
  f.record_width = [](const TrainConfig& cfg) { return cfg.data.seq_len + 1; };
  f.parse = [](const engine::Config&, TrainConfig&) { return absl::OkStatus(); };
  f.summary = [](const TrainConfig&) { return std::string("model: toy encoder classifier"); };
  f.activation_slots = [](const TrainConfig&, const ModelPlace&) -> absl::StatusOr<int64_t> {
    return 1;
  };
  f.plan = [](const TrainConfig&, const GptPrecision&,
              const ModelPlace&) -> absl::StatusOr<engine::MemoryPlan> {
    engine::MemoryPlan p;
    p.add("params", "toy", 64 << 10);
    return p;
  };
  f.offload_bytes = [](const TrainConfig&, const GptPrecision&,
                       const ModelPlace&) -> absl::StatusOr<size_t> { return size_t{0}; };
  f.create = [](const TrainConfig& cfg, const GptPrecision&,
                const ModelPlace&) -> absl::StatusOr<std::unique_ptr<Model>> {
    return std::unique_ptr<Model>(new ToyModel(cfg));
  };
  f.model_record = [](const TrainConfig&, std::map<std::string, std::string>& r) {
    r["d_model"] = std::to_string(kDim);
  };
  f.tensor_shapes = [](const TrainConfig&) {
    return std::map<std::string, std::vector<int64_t>>{{"wte.weight", {kVocab, kDim}}};
  };
  f.layers = [](const TrainConfig&) { return std::string("1 layer"); };
  f.layout_record = [](const TrainConfig&, std::map<std::string, int64_t>&) {};
  return f;
}

// Sample i: T tokens of an LCG stream; class 1 when most are below kVocab / 2.
void toy_sample(int64_t i, int32_t* out, int64_t T) {
  uint64_t state = static_cast<uint64_t>(i) * 2654435761ULL + 12345;
  int64_t low = 0;
  for (int64_t t = 0; t < T; ++t) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    out[t] = static_cast<int32_t>((state >> 33) % kVocab);
    low += out[t] < kVocab / 2;
  }
  out[T] = 2 * low > T ? 1 : 0;
}

TrainConfig toy_config(int64_t steps) {
  // Registered once per process, before the trainer looks "toy" up.
  static const bool registered = family_registry().add(toy_family()).ok();
  EXPECT_TRUE(registered);
  TrainConfig cfg;
  cfg.family = "toy";
  cfg.data.seq_len = 9;
  cfg.train.micro_batch = 8;
  cfg.train.global_batch = 16;
  cfg.train.steps = steps;
  cfg.train.device = "cpu";
  cfg.train.log_interval = 1000;
  cfg.train.eval_iters = 0;
  cfg.optim.schedule.lr = 1e-2;
  cfg.optim.schedule.min_lr = 1e-2;
  cfg.optim.schedule.warmup_steps = 0;
  cfg.optim.schedule.style = DecayStyle::kConstant;
  cfg.optim.weight_decay = 0.0;
  cfg.optim.clip_grad = 0.0;
  return cfg;
}

SampleFn toy_samples(int64_t T) {
  return [T](int64_t i, int32_t* out) { toy_sample(i, out, T); };
}

TEST(ToyFamilyTest, TrainsThroughTheSharedTrainer) {
  const TrainConfig cfg = toy_config(150);
  ASSERT_EQ(family_of(cfg).type, "toy");
  absl::StatusOr<GptPrecision> prec = resolve_precision("cpu");
  ASSERT_TRUE(prec.ok()) << prec.status();
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::create(cfg, *prec, toy_samples(cfg.data.seq_len), nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  double first = 0.0, last = 0.0;
  for (int64_t s = 0; s < cfg.train.steps; ++s) {
    const StepStats st = (*t)->step();
    ASSERT_TRUE(std::isfinite(st.loss)) << "step " << st.step;
    ASSERT_GT(st.grad_norm, 0.0) << "step " << st.step;
    if (s < 10) first += st.loss / 10;
    if (s >= cfg.train.steps - 10) last += st.loss / 10;
  }
  EXPECT_NEAR(first, std::log(2.0), 0.2);
  EXPECT_LT(last, 0.5 * first) << "first " << first << ", last " << last;
}

TEST(ToyFamilyTest, StepGradientMatchesCentralDifferences) {
  // One step's gradient (the trainer's mean over the global batch, zero learning rate) against
  // central differences of the same mean loss, in a few coordinates of every parameter.
  TrainConfig cfg = toy_config(1);
  cfg.optim.schedule.lr = cfg.optim.schedule.min_lr = 0.0;
  absl::StatusOr<GptPrecision> prec = resolve_precision("cpu");
  ASSERT_TRUE(prec.ok());
  absl::StatusOr<std::unique_ptr<Trainer>> t =
      Trainer::create(cfg, *prec, toy_samples(cfg.data.seq_len), nullptr);
  ASSERT_TRUE(t.ok()) << t.status();
  auto& toy = dynamic_cast<ToyModel&>((*t)->model());
  const std::vector<float> before = toy.values();
  (*t)->step();
  const std::vector<float> grad = toy.grads();
  ASSERT_EQ(toy.values(), before);  // lr 0: the step changed nothing
  engine::Stream s = engine::Stream::cpu();
  const int64_t G = cfg.train.global_batch, B = cfg.train.micro_batch;
  auto mean_loss = [&] {
    double sum = 0.0;
    for (int64_t m = 0; m < G / B; ++m) {
      toy.load_micro_batch(toy_samples(cfg.data.seq_len), m * B, m);
      toy.forward(0, 0, m, false, 0, s);
      sum += toy.loss_sum(0, s) / static_cast<double>(G);
    }
    return sum;
  };
  int checked = 0;
  for (const Param& p : toy.params().all()) {
    for (int64_t i = 0; i < p.numel(); i += std::max<int64_t>(p.numel() / 5, 1)) {
      const size_t k = static_cast<size_t>(p.offset + i);
      const float w = toy.values()[k], eps = 1e-2f;
      toy.values()[k] = w + eps;
      const double up = mean_loss();
      toy.values()[k] = w - eps;
      const double down = mean_loss();
      toy.values()[k] = w;
      const double fd = (up - down) / (2.0 * eps);
      EXPECT_NEAR(grad[k], fd, 2e-3 + 2e-2 * std::fabs(fd)) << p.name << "[" << i << "]";
      ++checked;
    }
  }
  EXPECT_GE(checked, 30);
}

}  // namespace
}  // namespace anvil::model
