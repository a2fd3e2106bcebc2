// LinearHead (see cls_head.h): forward, backward, AdamW and checkpoint slices of the head.
#include "model/cls_head.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/philox.h"
#include "engine/status.h"
#include "engine/tensor.h"
#include "ops/adamw.h"
#include "ops/init_normal.h"

namespace anvil::model {
namespace {

constexpr char kWeight[] = "classifier.weight";
constexpr char kBias[] = "classifier.bias";

// log sum_k exp(z_k), stably.
double log_sum_exp(const double* z, int64_t n) {
  const double mx = *std::max_element(z, z + n);
  double sum = 0.0;
  for (int64_t k = 0; k < n; ++k) sum += std::exp(z[k] - mx);
  return mx + std::log(sum);
}

}  // namespace

double cls_loss_sum(absl::Span<const double> logits, absl::Span<const int32_t> labels) {
  const int64_t k = static_cast<int64_t>(logits.size() / labels.size());
  double loss = 0.0;
  for (size_t e = 0; e < labels.size(); ++e) {
    const double* z = logits.data() + static_cast<int64_t>(e) * k;
    loss += log_sum_exp(z, k) - z[labels[e]];
  }
  return loss;
}

int64_t cls_correct(absl::Span<const double> logits, absl::Span<const int32_t> labels) {
  const int64_t k = static_cast<int64_t>(logits.size() / labels.size());
  int64_t correct = 0;
  for (size_t e = 0; e < labels.size(); ++e) {
    const double* z = logits.data() + static_cast<int64_t>(e) * k;
    correct += std::max_element(z, z + k) - z == labels[e];
  }
  return correct;
}

LinearHead::LinearHead(int64_t d, int64_t classes, int64_t choices, float init_std, uint64_t seed)
    : d_(d), classes_(classes), choices_(choices), seed_(seed) {
  const size_t n = static_cast<size_t>(outputs() * d_ + outputs());
  value_.assign(n, 0.0f);
  grad_.assign(n, 0.0f);
  m_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  for (int64_t i = 0; i < outputs() * d_; ++i) {
    value_[static_cast<size_t>(i)] = static_cast<float>(
        init_std * ops::init_normal_sample(seed, kHeadInitCounter + static_cast<uint64_t>(i)));
  }
}

double LinearHead::keep(const HeadDropout& drop, int64_t i) const {
  if (drop.p <= 0.0f) return 1.0;
  const float u =
      engine::philox_uniform_at(seed_ ^ kHeadDropoutKey, drop.offset, static_cast<uint64_t>(i));
  return u >= drop.p ? 1.0 / (1.0 - static_cast<double>(drop.p)) : 0.0;
}

std::vector<double> LinearHead::forward(absl::Span<const double> hidden, int64_t examples,
                                        const HeadDropout& drop) const {
  const int64_t rows = examples * choices_, outs = outputs();
  ANVIL_CHECK_MSG(static_cast<int64_t>(hidden.size()) == rows * d_,
                  "LinearHead::forward: hidden is not [examples * choices, d]");
  std::vector<double> logits(static_cast<size_t>(examples * classes_));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < outs; ++o) {
      double z = value_[static_cast<size_t>(outs * d_ + o)];
      for (int64_t j = 0; j < d_; ++j) {
        const int64_t i = r * d_ + j;
        z += static_cast<double>(value_[static_cast<size_t>(o * d_ + j)]) *
             hidden[static_cast<size_t>(i)] * keep(drop, i);
      }
      logits[static_cast<size_t>(r * outs + o)] = z;  // [e, k] or [e, c]: both r * outs + o
    }
  }
  return logits;
}

double LinearHead::backward(absl::Span<const double> hidden, absl::Span<const double> logits,
                            absl::Span<const int32_t> labels, double scale, const HeadDropout& drop,
                            absl::Span<double> dhidden) {
  const int64_t examples = static_cast<int64_t>(labels.size()), outs = outputs();
  ANVIL_CHECK_MSG(static_cast<int64_t>(logits.size()) == examples * classes_ &&
                      dhidden.size() == hidden.size() &&
                      static_cast<int64_t>(hidden.size()) == examples * choices_ * d_,
                  "LinearHead::backward: shapes differ from forward's");
  double loss = 0.0;
  std::vector<double> dz(static_cast<size_t>(classes_));
  for (int64_t e = 0; e < examples; ++e) {
    const double* z = logits.data() + e * classes_;
    const double lse = log_sum_exp(z, classes_);
    const int32_t y = labels[static_cast<size_t>(e)];
    loss += lse - z[y];
    // d loss / d z_k = softmax_k - [k == y], times scale.
    for (int64_t k = 0; k < classes_; ++k) {
      dz[static_cast<size_t>(k)] = scale * (std::exp(z[k] - lse) - (k == y ? 1.0 : 0.0));
    }
    // Row r = e * choices + c feeds outputs o: logits index r * outs + o = e * classes + k.
    for (int64_t c = 0; c < choices_; ++c) {
      const int64_t r = e * choices_ + c;
      for (int64_t j = 0; j < d_; ++j) dhidden[static_cast<size_t>(r * d_ + j)] = 0.0;
      for (int64_t o = 0; o < outs; ++o) {
        const double g = dz[static_cast<size_t>(r * outs + o - e * classes_)];
        // Multiple choice: the bias shifts every choice's logit alike, and the softmax over the
        // choices ignores that, so its gradient is exactly 0 (summing the dz would leave only
        // rounding noise, which AdamW would turn into updates of order lr).
        if (choices_ == 1) grad_[static_cast<size_t>(outs * d_ + o)] += static_cast<float>(g);
        for (int64_t j = 0; j < d_; ++j) {
          const int64_t i = r * d_ + j;
          const double mask = keep(drop, i);
          grad_[static_cast<size_t>(o * d_ + j)] +=
              static_cast<float>(g * hidden[static_cast<size_t>(i)] * mask);
          dhidden[static_cast<size_t>(i)] +=
              g * static_cast<double>(value_[static_cast<size_t>(o * d_ + j)]) * mask;
        }
      }
    }
  }
  return loss;
}

void LinearHead::zero_grads() { std::fill(grad_.begin(), grad_.end(), 0.0f); }

double LinearHead::grad_sum_squares() const {
  double s = 0.0;
  for (float g : grad_) s += static_cast<double>(g) * g;
  return s;
}

void LinearHead::optimizer_step(const GptModel::OptimizerStep& s) {
  engine::Stream cpu = engine::Stream::cpu();
  const int64_t nw = outputs() * d_, nb = outputs();
  auto view = [&](std::vector<float>& v, int64_t first, int64_t n) {
    return engine::make_view(v.data() + first, engine::DType::kF32, engine::Device::kCpu, {n});
  };
  for (int part = 0; part < 2; ++part) {  // W with weight decay, b without (Megatron's groups)
    const int64_t first = part == 0 ? 0 : nw, n = part == 0 ? nw : nb;
    const ops::AdamWArgs a{s.lr,   s.beta1,     s.beta2, s.eps, part == 0 ? s.weight_decay : 0.0f,
                           s.step, s.grad_scale};
    ops::adamw_update(a, view(value_, first, n), view(m_, first, n), view(v_, first, n), {},
                      view(grad_, first, n), cpu);
  }
}

std::vector<engine::HostSlice> LinearHead::slices() const {
  const int64_t outs = outputs(), nw = outs * d_;
  engine::HostSlice w{kWeight,
                      {outs, d_},
                      {0, 0},
                      {outs, d_},
                      std::vector<float>(value_.begin(), value_.begin() + nw)};
  engine::HostSlice b{
      kBias, {outs}, {0}, {outs}, std::vector<float>(value_.begin() + nw, value_.end())};
  return {w, b};
}

absl::Status LinearHead::load(const TensorLookup& lookup) {
  const int64_t outs = outputs(), nw = outs * d_;
  ANVIL_ASSIGN_OR_RETURN(engine::HostSlice w, lookup(kWeight));
  ANVIL_ASSIGN_OR_RETURN(engine::HostSlice b, lookup(kBias));
  if (w.shape != std::vector<int64_t>{outs, d_} || b.shape != std::vector<int64_t>{outs}) {
    return absl::InvalidArgumentError(absl::StrCat(
        kWeight, " [", absl::StrJoin(w.shape, ", "), "] and ", kBias, " [",
        absl::StrJoin(b.shape, ", "), "]: this head needs [", outs, ", ", d_, "] and [", outs,
        "] (", classes_, choices_ > 1 ? " choices" : " classes", ", d_model ", d_, ")"));
  }
  std::copy(w.data.begin(), w.data.end(), value_.begin());
  std::copy(b.data.begin(), b.data.end(), value_.begin() + nw);
  return absl::OkStatus();
}

}  // namespace anvil::model
