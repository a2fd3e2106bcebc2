// Tests of BERT's head blocks (model/blocks/mlm_head.h) on the CPU in double.
//  - Gradients: the loss L = a * (sum_r CE(u_r W^T + out_b, t_r) + w_b * sum_b CE(z_b, label_b))
//    (a: grad_scale; w_b: the binary loss's weight; an ignored target) through the transform,
//    the decoder and the binary head: the gradients of x and of every parameter against central
//    finite differences (parameters +=, dx =). The check fails for a backward that leaves out
//    the binary head's contribution to dx.
//  - The saved-activation plan: names and shapes, with and without the binary head.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/blocks/mlm_head.h"
#include "ops/cross_entropy.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

constexpr int64_t kB = 2, kT = 3, kRows = kB * kT, kD = 4, kVocab = 6, kPadded = 8;
const std::vector<int32_t> kTargets = {5, -1, 0, 2, -1, 1};
const std::vector<int32_t> kLabels = {1, 0};
constexpr float kGradScale = 0.25f, kBinaryWeight = 1.5f;

MlmHeadConfig config(bool binary = true) {
  MlmHeadConfig c;
  c.rows = kRows;
  c.batch = kB;
  c.d_model = kD;
  c.ln_eps = 1e-5f;
  c.binary = binary;
  return c;
}

// Every input of the heads in one vector (x first), so one finite-difference sweep covers all.
struct Layout {
  std::vector<std::pair<std::string, std::vector<int64_t>>> parts = {
      {"x", {kRows, kD}}, {"dense_w", {kD, kD}},  {"dense_b", {kD}},    {"ln_g", {kD}},
      {"ln_b", {kD}},     {"wte", {kPadded, kD}}, {"out_b", {kPadded}}, {"pool_w", {kD, kD}},
      {"pool_b", {kD}},   {"bin_w", {2, kD}},     {"bin_b", {2}}};
  int64_t size(size_t i) const {
    int64_t n = 1;
    for (int64_t d : parts[i].second) n *= d;
    return n;
  }
  int64_t total() const {
    int64_t n = 0;
    for (size_t i = 0; i < parts.size(); ++i) n += size(i);
    return n;
  }
};

// The views of theta's parts, in Layout order; `fill`: each part's values from theta, else a
// constant (the gradients' starting value).
std::vector<TensorView> views(TensorPool& pool, const std::vector<double>& theta, double fill,
                              bool from_theta) {
  const Layout l;
  std::vector<TensorView> out;
  int64_t at = 0;
  for (size_t i = 0; i < l.parts.size(); ++i) {
    const int64_t n = l.size(i);
    std::vector<double> v = from_theta
                                ? std::vector<double>(theta.begin() + at, theta.begin() + at + n)
                                : std::vector<double>(static_cast<size_t>(n), fill);
    out.push_back(pool.from_f64(v, l.parts[i].second));
    at += n;
  }
  return out;
}

MlmHeadWeights weights(const std::vector<TensorView>& v) {
  MlmHeadWeights w;
  w.dense_w = v[1];
  w.dense_b = v[2];
  w.ln_g = v[3];
  w.ln_b = v[4];
  w.out_b = v[6];
  w.pool_w = v[7];
  w.pool_b = v[8];
  w.bin_w = v[9];
  w.bin_b = v[10];
  return w;
}

MlmHeadActs acts(TensorPool& pool) {
  auto take = [&](const std::string&, DType dtype, const std::vector<int64_t>& shape) {
    return pool.empty(dtype == DType::kF32 ? DType::kF64 : dtype, shape);
  };
  return mlm_head_saved_acts(config(), DType::kF64, DType::kF32, "", take);
}

struct Indices {
  TensorView cls, batch, targets, labels;
};
Indices indices(TensorPool& pool) {
  std::vector<int32_t> cls, batch;
  for (int32_t b = 0; b < kB; ++b) {
    cls.push_back(b * static_cast<int32_t>(kT));
    batch.push_back(b);
  }
  return {pool.from_i32(cls, {kB}), pool.from_i32(batch, {kB}), pool.from_i32(kTargets, {kRows}),
          pool.from_i32(kLabels, {kB})};
}

// Forward of both heads; train: the losses' gradients replace the logits. The weighted loss.
double forward(TensorPool& pool, TestStream& s, const std::vector<TensorView>& v,
               const MlmHeadActs& a, TensorView logits, const Indices& ix, bool train) {
  const MlmHeadConfig c = config();
  const MlmHeadWeights w = weights(v);
  const TensorView losses = pool.empty(DType::kF64, {kRows});
  mlm_transform_forward(c, a, v[0], w, s);
  mlm_decoder_forward(logits, a.out, v[5], w, s);
  ops::softmax_cross_entropy({kRows, kVocab, kPadded, 1.0f}, losses, train ? logits : TensorView{},
                             logits, ix.targets, s);
  binary_head_forward(c, a, v[0], ix.cls, ix.batch, w, ix.labels, train, s);
  double mlm = 0.0, binary = 0.0;
  for (double l : testing::to_host_f64(losses)) mlm += l;
  for (double l : testing::to_host_f64(a.bin_losses)) binary += l;
  return kGradScale * (mlm + kBinaryWeight * binary);
}

double loss(TensorPool& pool, TestStream& s, const std::vector<double>& theta) {
  const std::vector<TensorView> v = views(pool, theta, 0.0, true);
  return forward(pool, s, v, acts(pool), pool.empty(DType::kF64, {kRows, kPadded}), indices(pool),
                 /*train=*/false);
}

// The analytic gradient of theta (parameters from a start of g0: += is checked; dx =).
std::vector<double> backward(TensorPool& pool, TestStream& s, const std::vector<double>& theta,
                             double g0, bool with_binary) {
  const MlmHeadConfig c = config();
  const std::vector<TensorView> v = views(pool, theta, 0.0, true);
  const std::vector<TensorView> g = views(pool, theta, g0, false);
  const MlmHeadActs a = acts(pool);
  const TensorView logits = pool.empty(DType::kF64, {kRows, kPadded});
  const Indices ix = indices(pool);
  forward(pool, s, v, a, logits, ix, /*train=*/true);
  MlmHeadScratch sc;
  sc.rows_d = pool.empty(DType::kF64, {kRows, kD});
  sc.ln_ws = pool.workspace(1 << 16);
  sc.bias_sums = pool.empty(DType::kF64, {kPadded});
  sc.dcls = pool.empty(DType::kF64, {kB, kD});
  sc.dcls_sum = pool.empty(DType::kF64, {kB, kD});
  const MlmHeadWeights gw = weights(g), w = weights(v);
  const TensorView du = pool.empty(DType::kF64, {kRows, kD});
  mlm_decoder_backward(du, g[5], gw, logits, a.out, v[5], sc, kGradScale, s);
  mlm_transform_backward(c, g[0], gw, du, v[0], a, w, sc, s);
  if (with_binary) {
    binary_head_backward(c, g[0], gw, a, ix.cls, ix.batch, w, sc, kGradScale * kBinaryWeight, s);
  }
  std::vector<double> out;
  for (size_t i = 0; i < g.size(); ++i) {
    std::vector<double> part = testing::to_host_f64(g[i]);
    if (i > 0) {
      for (double& x : part) x -= g0;
    }
    out.insert(out.end(), part.begin(), part.end());
  }
  return out;
}

std::vector<double> random(int64_t n, uint64_t seed) {
  const std::vector<float> v = testing::random_uniform(n, seed, -1.0f, 1.0f);
  return {v.begin(), v.end()};
}

TEST(MlmHeadBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> theta = random(Layout().total(), 7);
  const std::vector<double> got = backward(pool, stream, theta, 0.5, /*with_binary=*/true);
  const std::vector<double> num = testing::numeric_gradient(
      [&](const std::vector<double>& t) { return loss(pool, stream, t); }, theta);
  double norm = 0.0;
  for (double x : got) norm += x * x;
  EXPECT_GT(norm, 0.0);
  const Layout l;
  int64_t at = 0;
  for (size_t i = 0; i < l.parts.size(); ++i) {
    const int64_t n = l.size(i);
    SCOPED_TRACE(l.parts[i].first);
    const std::vector<double> g(got.begin() + at, got.begin() + at + n);
    const std::vector<double> r(num.begin() + at, num.begin() + at + n);
    EXPECT_TRUE(testing::tensors_near(g, r, Tol{1e-8, 1e-6}, /*allow_zero_ref=*/true));
    at += n;
  }
  // The padding rows of the decoder and of its bias get no gradient.
  const int64_t wte_at = l.size(0) + l.size(1) + l.size(2) + l.size(3) + l.size(4);
  for (int64_t i = kVocab * kD; i < kPadded * kD; ++i) EXPECT_EQ(got[wte_at + i], 0.0) << i;
  // The check can fail: dx without the binary head's [CLS] rows.
  const std::vector<double> partial = backward(pool, stream, theta, 0.5, /*with_binary=*/false);
  const std::vector<double> dx(partial.begin(), partial.begin() + l.size(0));
  const std::vector<double> num_dx(num.begin(), num.begin() + l.size(0));
  EXPECT_FALSE(testing::tensors_near(dx, num_dx, Tol{1e-8, 1e-6}));
}

TEST(MlmHeadBlock, SavedActivationPlan) {
  for (bool binary : {false, true}) {
    std::vector<std::string> names;
    std::vector<std::vector<int64_t>> shapes;
    auto take = [&](const std::string& n, DType, const std::vector<int64_t>& shape) {
      names.push_back(n);
      shapes.push_back(shape);
      return TensorView{};
    };
    mlm_head_saved_acts(config(binary), DType::kBF16, DType::kF32, "slot1.", take);
    std::vector<std::string> want = {"slot1.lm_head.dense", "slot1.lm_head.gelu",
                                     "slot1.lm_head.layernorm", "slot1.lm_head.layernorm.mean",
                                     "slot1.lm_head.layernorm.rstd"};
    std::vector<std::vector<int64_t>> want_shapes = {
        {kRows, kD}, {kRows, kD}, {kRows, kD}, {kRows}, {kRows}};
    if (binary) {
      for (const char* n :
           {"pooler.input", "pooler.dense", "pooler", "binary_head.logits", "binary_head.losses"}) {
        want.push_back(std::string("slot1.") + n);
      }
      want_shapes.insert(want_shapes.end(), {{kB, kD}, {kB, kD}, {kB, kD}, {kB, 2}, {kB}});
    }
    EXPECT_EQ(names, want);
    EXPECT_EQ(shapes, want_shapes);
  }
}

}  // namespace
}  // namespace anvil::model::blocks
