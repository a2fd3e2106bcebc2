// A model family registered from tests/ (issue 22 item 7), written as a third party would write
// one: only the public interfaces (model/model.h, model/train/family.h, model/blocks/,
// parallel/). A one-layer encoder classifier:
//   x      = mean over the sample's T tokens of wte[token]           [B, d]
//   h      = x + mlp(x)                                              [B, d] (blocks/mlp.h)
//   logits = h W^T + b                                               [B, classes] (blocks/linear.h)
//   loss   = softmax cross-entropy against the sample's class (per-micro-batch mean)
// registered as [model] type "toy" and trained through the shared trainer
// (model/train/trainer.h), in f32 or f64 (Precision::act) on the CPU.
// Tensor parallelism ([parallel] tp): the MLP is Megatron's column/row-parallel pair
// (blocks/mlp.h with tp, tp_rank: this rank's ffn / tp hidden units) with the conjugate
// mappings of parallel/tensor_parallel.h around it: the partial output summed over TP after the
// forward (row_parallel_out), the partial input gradient after the backward
// (col_parallel_in_grad). wte, b_out and the head are replicated; their gradients are equal on
// every TP rank, so the gradient norm counts them on TP rank 0 only.
// Data parallelism ([parallel] dp): the flat gradient buffer is summed over DP by
// parallel/grad_sync.h (plain DP, stage 0), which also runs AdamW (ops/adamw.h).
// Weights are initialized from an LCG over each whole (unsplit) tensor, so every layout holds
// the same model. Sample record: tokens[T] | class[1].
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "engine/arena.h"
#include "engine/status.h"
#include "engine/tensor.h"
#include "model/blocks/linear.h"
#include "model/blocks/mlp.h"
#include "model/model.h"
#include "model/param_table.h"
#include "model/train/family.h"
#include "model/train/trainer.h"
#include "ops/adamw.h"
#include "parallel/grad_sync.h"
#include "parallel/tensor_parallel.h"

namespace anvil::model::toy {

inline constexpr int64_t kVocab = 16, kDim = 16, kFfn = 32, kClasses = 2;

template <typename T>
constexpr engine::DType kDType = sizeof(T) == 8 ? engine::DType::kF64 : engine::DType::kF32;

// The toy classifier as the trainer's Model on one rank: one pipeline stage, one activation
// slot, every parameter in one flat buffer (value = master, f32 or f64) of a ParamTable.
template <typename T>
class ToyModel : public Model {
 public:
  static absl::StatusOr<std::unique_ptr<Model>> create(const TrainConfig& cfg,
                                                       const ModelPlace& at) {
    std::unique_ptr<ToyModel> m(new ToyModel(cfg, at));
    ANVIL_RETURN_IF_ERROR(m->setup_sync(at));
    return std::unique_ptr<Model>(std::move(m));
  }

  // PipelineStage: the whole model, one activation set.
  int64_t slots() const override { return 1; }
  int64_t chunks() const override { return 1; }
  bool ends_model() const override { return true; }
  void forward(int64_t, int64_t, int64_t micro_batch, bool, uint64_t, engine::Stream& s) override {
    m_now_ = micro_batch;
    const int32_t* tok = &tokens_[static_cast<size_t>(micro_batch * B_ * T_)];
    const T* wte = param("wte.weight").value.template as<T>();
    for (int64_t b = 0; b < B_; ++b) {  // x = the mean of the sample's token embeddings
      for (int64_t k = 0; k < kDim; ++k) x_[b * kDim + k] = 0;
      for (int64_t t = 0; t < T_; ++t) {
        for (int64_t k = 0; k < kDim; ++k) x_[b * kDim + k] += wte[tok[b * T_ + t] * kDim + k];
      }
      for (int64_t k = 0; k < kDim; ++k) x_[b * kDim + k] /= static_cast<T>(T_);
    }
    blocks::mlp_forward(mlp_, view(y_, kDim), acts(), view(x_, kDim), weights(false), false, {}, s);
    tp_.row_parallel_out(view(y_, kDim), s);  // g: the sum of the ranks' partial outputs
    for (size_t i = 0; i < h_.size(); ++i) h_[i] = x_[i] + y_[i];
    std::vector<T> logits(static_cast<size_t>(B_ * kClasses));
    blocks::linear(view(logits, kClasses), view(h_, kDim), param("head.weight").value,
                   param("head.bias").value, s);
    loss_ = 0.0;
    for (int64_t b = 0; b < B_; ++b) {
      const T* z = &logits[static_cast<size_t>(b * kClasses)];
      const double top = static_cast<double>(*std::max_element(z, z + kClasses));
      double sum = 0.0;
      for (int64_t c = 0; c < kClasses; ++c) sum += std::exp(static_cast<double>(z[c]) - top);
      for (int64_t c = 0; c < kClasses; ++c) {
        probs_[b * kClasses + c] = static_cast<T>(std::exp(static_cast<double>(z[c]) - top) / sum);
      }
      loss_ -= std::log(static_cast<double>(probs_[b * kClasses + label(micro_batch, b)]));
    }
  }
  void backward(int64_t, int64_t, float grad_scale, engine::Stream& s) override {
    for (int64_t b = 0; b < B_; ++b) {
      for (int64_t c = 0; c < kClasses; ++c) {
        const T target = c == label(m_now_, b) ? 1 : 0;
        dlogits_[b * kClasses + c] = (probs_[b * kClasses + c] - target) * grad_scale;
      }
    }
    const engine::TensorView dlogits = view(dlogits_, kClasses);
    blocks::weight_bias_grad(param("head.weight").grad, param("head.bias").grad, dlogits,
                             view(h_, kDim), s);
    blocks::input_grad(view(dh_, kDim), dlogits, param("head.weight").value, s);
    blocks::MlpScratch scratch;
    scratch.dpre = view(dpre_, mlp_.in_width());
    blocks::mlp_backward(mlp_, view(dx_, kDim), weights(true), view(dh_, kDim), view(x_, kDim),
                         acts(), weights(false), {}, scratch, s);
    tp_.col_parallel_in_grad(view(dx_, kDim), s);  // f: the sum of the ranks' partial d x
    T* dwte = param("wte.weight").grad.template as<T>();
    const int32_t* tok = &tokens_[static_cast<size_t>(m_now_ * B_ * T_)];
    for (int64_t b = 0; b < B_; ++b) {  // d x = d h (residual) + the MLP's; spread over T
      for (int64_t t = 0; t < T_; ++t) {
        for (int64_t k = 0; k < kDim; ++k) {
          dwte[tok[b * T_ + t] * kDim + k] +=
              (dx_[b * kDim + k] + dh_[b * kDim + k]) / static_cast<T>(T_);
        }
      }
    }
  }
  double loss_sum(int64_t, engine::Stream&) override { return loss_; }
  LossViews loss_views(int64_t) override {
    LossViews v;
    v.token = engine::make_view(&loss_, engine::DType::kF64, engine::Device::kCpu, {1});
    return v;
  }
  std::vector<engine::TensorView> sent_activations(int64_t) override { return {}; }
  std::vector<engine::TensorView> received_activations(int64_t, int64_t) override { return {}; }
  std::vector<engine::TensorView> sent_grads(int64_t) override { return {}; }
  std::vector<engine::TensorView> received_grads(int64_t, int64_t) override { return {}; }

  // Model.
  ParamTable& params() override { return table_; }
  size_t arena_bytes() const override { return 4 * value_.size() * sizeof(T); }
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
  void zero_grads(engine::Stream& s) override { sync_->zero_grads(s); }
  void set_overlap_grad_sync(bool) override {}  // one bucket, reduced after the backward
  void finish_backward(engine::Stream&) override {}
  void sum_shared_grads(engine::Stream&) override {}
  void reduce_gradients(engine::Stream& s) override { sync_->reduce_gradients(s); }
  double grad_sum_squares(engine::Stream&) override {
    double ss = 0.0;
    for (const Param& p : table_.all()) {
      if (p.tp_split_dim < 0 && tp_.rank > 0) continue;  // a TP replica: counted on rank 0
      const T* g = p.grad.template as<T>();
      for (int64_t i = 0; i < p.numel(); ++i) ss += static_cast<double>(g[i]) * g[i];
    }
    return ss;
  }
  bool grad_squares_over_tp() const override { return false; }  // the trainer sums over TP
  bool zero_sharded() const override { return false; }
  void optimizer_step(const OptimizerStep& o, engine::Stream& s) override {
    ops::AdamWArgs a;
    a.lr = o.lr;
    a.beta1 = o.beta1;
    a.beta2 = o.beta2;
    a.eps = o.eps;
    a.weight_decay = o.weight_decay;
    a.step = o.step;
    a.grad_scale = o.grad_scale;
    sync_->optimizer_step(a, s);
  }
  std::vector<engine::HostSlice> checkpoint_slices(int, engine::Stream&) override { return {}; }
  absl::Status load_checkpoint(const TensorLookup&, bool, engine::Stream&) override {
    return absl::UnimplementedError("the toy family keeps no checkpoints");
  }

  std::vector<T>& values() { return value_; }
  const std::vector<T>& grads() const { return grad_; }

 private:
  ToyModel(const TrainConfig& cfg, const ModelPlace& at)
      : B_(cfg.train.micro_batch), T_(cfg.data.seq_len) {
    const int tp = cfg.parallel.tp;
    tp_.comm = at.tp;
    tp_.size = tp;
    tp_.rank = at.tp_rank;
    // Shard shapes (ParamTable's convention); W_in's rows and W_out's columns are split.
    ParamTableBuilder b;
    b.begin_bucket("toy");
    b.add("wte.weight", {kVocab, kDim}, true);
    b.add("mlp.w_in", {kFfn / tp, kDim}, true, 0);
    b.add("mlp.b_in", {kFfn / tp}, false, 0);
    b.add("mlp.w_out", {kDim, kFfn / tp}, true, 1);
    b.add("mlp.b_out", {kDim}, false);
    b.add("head.weight", {kClasses, kDim}, true);
    b.add("head.bias", {kClasses}, false);
    table_ = b.build();
    const size_t n = static_cast<size_t>(table_.flat_numel());
    value_.assign(n, 0);
    grad_.assign(n, 0);
    m_.assign(n, 0);
    v_.assign(n, 0);
    table_.bind(flat(value_), flat(value_), flat(grad_), flat(m_), flat(v_));
    // Deterministic small weights (an LCG over each whole tensor, of which this rank keeps its
    // shard), biases 0.
    uint64_t state = cfg.train.seed;
    for (Param& p : table_.all()) {
      if (!p.weight_decay) continue;
      const int64_t parts = p.tp_split_dim < 0 ? 1 : tp;
      std::vector<T> whole(static_cast<size_t>(p.numel() * parts));
      for (T& w : whole) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        w = static_cast<T>((static_cast<float>(state >> 40) / static_cast<float>(1 << 24) - 0.5f) *
                           0.4f);
      }
      T* w = p.value.template as<T>();
      for (int64_t i = 0; i < p.numel(); ++i) {
        w[i] = whole[static_cast<size_t>(tp_global_index(p, i, tp, at.tp_rank))];
      }
    }
    mlp_.d_model = kDim;
    mlp_.ffn = kFfn;
    mlp_.activation = blocks::MlpActivation::kGeluTanh;
    mlp_.bias = true;
    mlp_.tp = tp;
    mlp_.tp_rank = at.tp_rank;
    const size_t rows = static_cast<size_t>(B_), local = static_cast<size_t>(mlp_.local_ffn());
    for (std::vector<T>* v : {&x_, &y_, &h_, &dh_, &dx_}) v->assign(rows * kDim, 0);
    for (std::vector<T>* v : {&pre_, &act_, &dpre_}) v->assign(rows * local, 0);
    probs_.assign(rows * kClasses, 0);
    dlogits_.assign(rows * kClasses, 0);
  }

  // Plain DP over the DP group (none with one DP rank): one bucket per table bucket, no layer
  // hooks.
  absl::Status setup_sync(const ModelPlace& at) {
    std::vector<parallel::SyncBucket> buckets;
    for (const ParamTable::Bucket& k : table_.buckets()) {
      buckets.push_back({k.begin, k.decay_end, k.end, false});
    }
    parallel::SyncBuffers buf;
    buf.value = buf.master = flat(value_);
    buf.m = flat(m_);
    buf.v = flat(v_);
    buf.grad = flat(grad_);
    parallel::GradSyncOptions opt;
    opt.dp = at.dp;
    auto sync = parallel::GradSync::create(std::move(buckets), {}, {}, buf, opt,
                                           [](int64_t, parallel::LayerPart, engine::TensorView) {});
    if (!sync.ok()) return sync.status();
    sync_ = std::move(*sync);
    return absl::OkStatus();
  }

  static engine::TensorView flat(std::vector<T>& f) {
    return engine::make_view(f.data(), kDType<T>, engine::Device::kCpu,
                             {static_cast<int64_t>(f.size())});
  }
  // A host vector as [B, cols].
  engine::TensorView view(std::vector<T>& f, int64_t cols) const {
    return engine::make_view(f.data(), kDType<T>, engine::Device::kCpu, {B_, cols});
  }
  Param& param(const std::string& name) { return *table_.find(name); }
  int32_t label(int64_t m, int64_t b) const { return labels_[static_cast<size_t>(m * B_ + b)]; }
  blocks::MlpActs acts() { return {view(pre_, mlp_.in_width()), view(act_, mlp_.local_ffn())}; }
  blocks::MlpWeights weights(bool grads) {
    auto pick = [&](const char* n) { return grads ? param(n).grad : param(n).value; };
    return {pick("mlp.w_in"), pick("mlp.b_in"), pick("mlp.w_out"), pick("mlp.b_out")};
  }

  int64_t B_, T_, m_now_ = 0;
  parallel::TensorParallel tp_;
  ParamTable table_;
  std::vector<T> value_, grad_, m_, v_;
  std::unique_ptr<parallel::GradSync> sync_;
  blocks::MlpConfig mlp_;
  std::vector<T> x_, y_, h_, pre_, act_, dpre_, probs_, dlogits_, dh_, dx_;
  std::vector<int32_t> tokens_, labels_;
  double loss_ = 0.0;
};

// The toy's registry entry. Layouts it refuses: pipeline stages, sequence parallelism, ZeRO,
// a TP size that does not divide the MLP's hidden units.
inline Family toy_family() {
  Family f;
  f.type = "toy";
  f.title = "Toy";
  f.record_width = [](const TrainConfig& cfg) { return cfg.data.seq_len + 1; };
  f.parse = [](const engine::Config&, TrainConfig&) { return absl::OkStatus(); };
  f.summary = [](const TrainConfig&) { return std::string("model: toy encoder classifier"); };
  f.activation_slots = [](const TrainConfig&, const ModelPlace&) -> absl::StatusOr<int64_t> {
    return 1;
  };
  f.plan = [](const TrainConfig&, const Precision&,
              const ModelPlace&) -> absl::StatusOr<engine::MemoryPlan> {
    engine::MemoryPlan p;
    p.add("params", "toy", 64 << 10);
    return p;
  };
  f.offload_bytes = [](const TrainConfig&, const Precision&,
                       const ModelPlace&) -> absl::StatusOr<size_t> { return size_t{0}; };
  f.create = [](const TrainConfig& cfg, const Precision& prec,
                const ModelPlace& at) -> absl::StatusOr<std::unique_ptr<Model>> {
    const parallel::ParallelConfig& pc = cfg.parallel;
    if (pc.pp != 1 || pc.sequence_parallel || pc.zero_stage != 0 || kFfn % pc.tp != 0) {
      return absl::UnimplementedError(
          absl::StrCat("the toy family trains with pp 1, no sequence parallelism, zero_stage 0 and "
                       "a tp dividing ",
                       kFfn));
    }
    if (prec.device != engine::Device::kCpu) {
      return absl::UnimplementedError("the toy family trains on the CPU");
    }
    if (prec.act == engine::DType::kF64 && prec.grad == engine::DType::kF64) {
      return ToyModel<double>::create(cfg, at);
    }
    if (prec.act == engine::DType::kF32 && prec.grad == engine::DType::kF32) {
      return ToyModel<float>::create(cfg, at);
    }
    return absl::UnimplementedError("the toy family computes in f32 or f64");
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

// Adds "toy" to the process's registry once (later calls: whether the first one succeeded).
inline bool register_toy_family() {
  static const bool registered = family_registry().add(toy_family()).ok();
  return registered;
}

// Sample i: T tokens of an LCG stream; class 1 when most are below kVocab / 2.
inline void toy_sample(int64_t i, int32_t* out, int64_t T) {
  uint64_t state = static_cast<uint64_t>(i) * 2654435761ULL + 12345;
  int64_t low = 0;
  for (int64_t t = 0; t < T; ++t) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    out[t] = static_cast<int32_t>((state >> 33) % kVocab);
    low += out[t] < kVocab / 2;
  }
  out[T] = 2 * low > T ? 1 : 0;
}

inline SampleFn toy_samples(int64_t T) {
  return [T](int64_t i, int32_t* out) { toy_sample(i, out, T); };
}

// A single-rank config of the toy (registered first): constant lr 1e-2, no decay, no clipping.
inline TrainConfig toy_config(int64_t steps) {
  TrainConfig cfg;
  cfg.family = register_toy_family() ? "toy" : "toy (registration failed)";
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

// Parameter p's values (its shard) as f64.
inline std::vector<double> toy_param_values(const Param& p) {
  std::vector<double> out(static_cast<size_t>(p.numel()));
  for (int64_t i = 0; i < p.numel(); ++i) {
    out[static_cast<size_t>(i)] = p.value.dtype == engine::DType::kF64
                                      ? p.value.as<double>()[i]
                                      : static_cast<double>(p.value.as<float>()[i]);
  }
  return out;
}

}  // namespace anvil::model::toy
