// LinearHead (see cls_head.h): forward, backward, AdamW and checkpoint slices of the head.
#include "model/blocks/cls_head.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "engine/philox.h"
#include "engine/status.h"
#include "engine/tensor.h"
#include "ops/adamw.h"
#include "ops/init_normal.h"

namespace anvil::model::blocks {
namespace {

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

LinearHead::LinearHead(int64_t d, int64_t classes, int64_t choices, float init_std, uint64_t seed,
                       bool pooler)
    : d_(d),
      classes_(classes),
      choices_(choices),
      seed_(seed),
      pooler_(pooler),
      w_(pooler ? d * d + d : 0) {
  const size_t n = static_cast<size_t>(w_ + outputs() * d_ + outputs());
  value_.assign(n, 0.0f);
  grad_.assign(n, 0.0f);
  m_.assign(n, 0.0f);
  v_.assign(n, 0.0f);
  for (const Part& p : parts()) {
    if (!p.decay) continue;  // biases stay 0
    const int64_t numel = p.shape[0] * p.shape[1];
    for (int64_t i = p.offset; i < p.offset + numel; ++i) {
      value_[static_cast<size_t>(i)] = static_cast<float>(
          init_std * ops::init_normal_sample(seed, kHeadInitCounter + static_cast<uint64_t>(i)));
    }
  }
}

std::vector<LinearHead::Part> LinearHead::parts() const {
  std::vector<Part> p;
  if (pooler_) {
    p.push_back({"pooler.dense.weight", {d_, d_}, 0, true});
    p.push_back({"pooler.dense.bias", {d_}, d_ * d_, false});
  }
  p.push_back({"classifier.weight", {outputs(), d_}, w_, true});
  p.push_back({"classifier.bias", {outputs()}, w_ + outputs() * d_, false});
  return p;
}

std::vector<double> LinearHead::head_input(absl::Span<const double> hidden) const {
  std::vector<double> x(hidden.begin(), hidden.end());
  if (!pooler_) return x;
  const int64_t rows = static_cast<int64_t>(hidden.size()) / d_;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < d_; ++o) {
      double z = value_[static_cast<size_t>(d_ * d_ + o)];
      for (int64_t j = 0; j < d_; ++j) {
        z += static_cast<double>(value_[static_cast<size_t>(o * d_ + j)]) *
             hidden[static_cast<size_t>(r * d_ + j)];
      }
      x[static_cast<size_t>(r * d_ + o)] = std::tanh(z);
    }
  }
  return x;
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
  const std::vector<double> x = head_input(hidden);
  std::vector<double> logits(static_cast<size_t>(examples * classes_));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < outs; ++o) {
      double z = value_[static_cast<size_t>(w_ + outs * d_ + o)];
      for (int64_t j = 0; j < d_; ++j) {
        const int64_t i = r * d_ + j;
        z += w(o, j) * x[static_cast<size_t>(i)] * keep(drop, i);
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
  const std::vector<double> x = head_input(hidden);
  std::vector<double> dx(x.size(), 0.0);
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
      for (int64_t o = 0; o < outs; ++o) {
        const double g = dz[static_cast<size_t>(r * outs + o - e * classes_)];
        // Multiple choice: the bias shifts every choice's logit alike, and the softmax over the
        // choices ignores that, so its gradient is exactly 0 (summing the dz would leave only
        // rounding noise, which AdamW would turn into updates of order lr).
        if (choices_ == 1) grad_[static_cast<size_t>(w_ + outs * d_ + o)] += static_cast<float>(g);
        for (int64_t j = 0; j < d_; ++j) {
          const int64_t i = r * d_ + j;
          const double mask = keep(drop, i);
          grad_[static_cast<size_t>(w_ + o * d_ + j)] +=
              static_cast<float>(g * x[static_cast<size_t>(i)] * mask);
          dx[static_cast<size_t>(i)] += g * w(o, j) * mask;
        }
      }
    }
  }
  if (!pooler_) {
    std::copy(dx.begin(), dx.end(), dhidden.begin());
    return loss;
  }
  // x = tanh(pre): d pre = dx (1 - x^2); dWp += d pre h^T, dbp += d pre, dh = Wp^T d pre.
  std::fill(dhidden.begin(), dhidden.end(), 0.0);
  const int64_t rows = examples * choices_;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < d_; ++o) {
      const double xo = x[static_cast<size_t>(r * d_ + o)];
      const double dpre = dx[static_cast<size_t>(r * d_ + o)] * (1.0 - xo * xo);
      grad_[static_cast<size_t>(d_ * d_ + o)] += static_cast<float>(dpre);
      for (int64_t j = 0; j < d_; ++j) {
        grad_[static_cast<size_t>(o * d_ + j)] +=
            static_cast<float>(dpre * hidden[static_cast<size_t>(r * d_ + j)]);
        dhidden[static_cast<size_t>(r * d_ + j)] +=
            dpre * static_cast<double>(value_[static_cast<size_t>(o * d_ + j)]);
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

void LinearHead::optimizer_step(const OptimizerStep& s) {
  engine::Stream cpu = engine::Stream::cpu();
  for (const Part& p : parts()) {  // weights with weight decay, biases without (Megatron's)
    const int64_t n = p.shape.size() == 2 ? p.shape[0] * p.shape[1] : p.shape[0];
    auto view = [&](std::vector<float>& v) {
      return engine::make_view(v.data() + p.offset, engine::DType::kF32, engine::Device::kCpu, {n});
    };
    ops::AdamWArgs a = adamw_args(s);
    if (!p.decay) a.weight_decay = 0.0f;
    ops::adamw_update(a, view(value_), view(m_), view(v_), {}, view(grad_), cpu);
  }
}

std::vector<engine::HostSlice> LinearHead::slices() const {
  std::vector<engine::HostSlice> out;
  for (const Part& p : parts()) {
    const int64_t n = p.shape.size() == 2 ? p.shape[0] * p.shape[1] : p.shape[0];
    out.push_back({p.name, p.shape, std::vector<int64_t>(p.shape.size(), 0), p.shape,
                   std::vector<float>(value_.begin() + p.offset, value_.begin() + p.offset + n)});
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> LinearHead::load(const TensorLookup& lookup) {
  std::vector<std::string> loaded;
  for (const Part& p : parts()) {
    absl::StatusOr<engine::HostSlice> t = lookup(p.name);
    if (absl::IsNotFound(t.status())) continue;
    if (!t.ok()) return t.status();
    if (t->shape != p.shape) {
      return absl::InvalidArgumentError(
          absl::StrCat(p.name, " [", absl::StrJoin(t->shape, ", "), "]: this head needs [",
                       absl::StrJoin(p.shape, ", "), "] (", classes_,
                       choices_ > 1 ? " choices" : " classes", ", d_model ", d_, ")"));
    }
    std::copy(t->data.begin(), t->data.end(), value_.begin() + p.offset);
    loaded.push_back(p.name);
  }
  return loaded;
}

}  // namespace anvil::model::blocks
