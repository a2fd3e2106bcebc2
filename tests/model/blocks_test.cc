// Tests of the shared transformer blocks (model/blocks/) on the CPU in double.
// MLP (model/blocks/mlp.h):
//  - for every activation, with and without biases, with and without the activation dropout
//    (fixed seed and offset): the gradients of L = sum(out * r) with respect to x, W_in, b_in,
//    W_out and b_out against central finite differences; parameter gradients accumulate (+=),
//    d x is written (=);
//  - the dropout changes a training forward and leaves an evaluation forward alone;
//  - tensor parallelism over 2 ranks: the ranks' partial outputs and input gradients sum to the
//    one-rank values, each rank's parameter gradients are its slices of the one-rank ones;
//  - the saved-activation plan: names and shapes.
// Norm (model/blocks/norm.h), LayerNorm and RMSNorm: with L = sum(y * r) of the residual-fused
// forward y = Norm(x + res), the backward's d(sum) (= and +=), dgamma and dbeta (+=) against
// central finite differences; RMSNorm keeps no mean and has no beta.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/blocks/mlp.h"
#include "model/blocks/norm.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

constexpr int64_t kRows = 3, kD = 4, kFfn = 6;
constexpr MlpDropoutSite kSite{1234, 77};
constexpr MlpActivation kActivations[] = {MlpActivation::kGeluTanh, MlpActivation::kGeluErf,
                                          MlpActivation::kRelu,     MlpActivation::kSwiglu,
                                          MlpActivation::kGeglu,    MlpActivation::kReglu,
                                          MlpActivation::kLiglu,    MlpActivation::kGegluTanh};

MlpConfig config(MlpActivation a, bool bias, float dropout, int64_t tp = 1, int64_t rank = 0) {
  MlpConfig c;
  c.d_model = kD;
  c.ffn = kFfn;
  c.activation = a;
  c.bias = bias;
  c.act_dropout = dropout;
  c.tp = tp;
  c.tp_rank = rank;
  return c;
}

std::string name(const MlpConfig& c) {
  return "activation " + std::to_string(static_cast<int>(c.activation)) +
         (c.bias ? ", bias" : ", no bias") + ", dropout " + std::to_string(c.act_dropout);
}

// The block's inputs flattened in this order: x, W_in, b_in, W_out, b_out (biases only with
// c.bias).
struct Inputs {
  std::vector<double> x, w_in, b_in, w_out, b_out;

  std::vector<double> flat() const {
    std::vector<double> v;
    for (const auto* p : {&x, &w_in, &b_in, &w_out, &b_out})
      v.insert(v.end(), p->begin(), p->end());
    return v;
  }
  static Inputs split(const MlpConfig& c, const std::vector<double>& v) {
    Inputs in;
    size_t at = 0;
    auto take = [&](std::vector<double>& dst, int64_t n) {
      dst.assign(v.begin() + static_cast<int64_t>(at), v.begin() + static_cast<int64_t>(at) + n);
      at += static_cast<size_t>(n);
    };
    take(in.x, kRows * kD);
    take(in.w_in, c.in_width() * kD);
    take(in.b_in, c.bias ? c.in_width() : 0);
    take(in.w_out, kD * c.local_ffn());
    take(in.b_out, c.bias ? kD : 0);
    return in;
  }
};

std::vector<double> random(int64_t n, uint64_t seed) {
  const std::vector<float> v = testing::random_uniform(n, seed, -1.0f, 1.0f);
  return {v.begin(), v.end()};
}

Inputs random_inputs(const MlpConfig& c, uint64_t seed) {
  Inputs in;
  in.x = random(kRows * kD, seed);
  in.w_in = random(c.in_width() * kD, seed + 1);
  if (c.bias) in.b_in = random(c.in_width(), seed + 2);
  in.w_out = random(kD * c.local_ffn(), seed + 3);
  if (c.bias) in.b_out = random(kD, seed + 4);
  return in;
}

// The block's tensors (f64) for one run.
struct Block {
  TensorView x, out, dx;
  MlpWeights w, g;
  MlpActs acts;
  MlpScratch scratch;
};

TensorView maybe(TensorPool& pool, const std::vector<double>& v, std::vector<int64_t> shape) {
  return v.empty() ? TensorView{} : pool.from_f64(v, std::move(shape));
}

// Parameter gradients start at `g0` (to see them accumulate); dx and scratch are poisoned.
Block make_block(TensorPool& pool, const MlpConfig& c, const Inputs& in, double g0 = 0.0) {
  const int64_t wi = c.in_width(), f = c.local_ffn();
  Block b;
  b.x = pool.from_f64(in.x, {kRows, kD});
  b.w = {pool.from_f64(in.w_in, {wi, kD}), maybe(pool, in.b_in, {wi}),
         pool.from_f64(in.w_out, {kD, f}), maybe(pool, in.b_out, {kD})};
  auto filled = [&](int64_t n, std::vector<int64_t> shape) {
    return pool.from_f64(std::vector<double>(static_cast<size_t>(n), g0), std::move(shape));
  };
  b.g = {filled(wi * kD, {wi, kD}), c.bias ? filled(wi, {wi}) : TensorView{},
         filled(kD * f, {kD, f}), c.bias ? filled(kD, {kD}) : TensorView{}};
  b.acts = mlp_saved_acts(c, kRows, DType::kF64, "",
                          [&](const std::string&, DType dt, const std::vector<int64_t>& shape) {
                            return pool.empty(dt, shape);
                          });
  b.out = pool.empty(DType::kF64, {kRows, kD});
  b.dx = pool.empty(DType::kF64, {kRows, kD});
  b.scratch.dpre = pool.empty(DType::kF64, {kRows, wi});
  if (c.needs_dact()) b.scratch.dact = pool.empty(DType::kF64, {kRows, f});
  return b;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> minus(std::vector<double> v, double c) {
  for (double& e : v) e -= c;
  return v;
}

std::vector<double> host(const TensorView& v) {
  return v.empty() ? std::vector<double>{} : testing::to_host_f64(v);
}

TEST(MlpBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> r = random(kRows * kD, 99);  // L = sum(out * r)
  const double g0 = 0.5;
  for (MlpActivation a : kActivations) {
    for (bool bias : {false, true}) {
      for (float p : {0.0f, 0.3f}) {
        const MlpConfig c = config(a, bias, p);
        SCOPED_TRACE(name(c));
        const Inputs in = random_inputs(c, 7);
        auto loss = [&](const std::vector<double>& flat) {
          Block b = make_block(pool, c, Inputs::split(c, flat));
          mlp_forward(c, b.out, b.acts, b.x, b.w, /*train=*/true, kSite, stream);
          return dot(testing::to_host_f64(b.out), r);
        };
        Block b = make_block(pool, c, in, g0);
        mlp_forward(c, b.out, b.acts, b.x, b.w, /*train=*/true, kSite, stream);
        const TensorView dout = pool.from_f64(r, {kRows, kD});
        mlp_backward(c, b.dx, b.g, dout, b.x, b.acts, b.w, kSite, b.scratch, stream);
        Inputs got;
        got.x = testing::to_host_f64(b.dx);
        got.w_in = minus(host(b.g.w_in), g0);
        got.b_in = minus(host(b.g.b_in), g0);
        got.w_out = minus(host(b.g.w_out), g0);
        got.b_out = minus(host(b.g.b_out), g0);
        const std::vector<double> num = testing::numeric_gradient(loss, in.flat());
        EXPECT_TRUE(testing::tensors_near(got.flat(), num, Tol{1e-7, 1e-6}));
      }
    }
  }
}

TEST(MlpBlock, DropoutOnlyWhenTraining) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  for (MlpActivation a : {MlpActivation::kRelu, MlpActivation::kGegluTanh}) {
    const MlpConfig plain = config(a, false, 0.0f), dropped = config(a, false, 0.5f);
    SCOPED_TRACE(name(dropped));
    const Inputs in = random_inputs(plain, 3);
    auto run = [&](const MlpConfig& c, bool train) {
      Block b = make_block(pool, c, in);
      mlp_forward(c, b.out, b.acts, b.x, b.w, train, kSite, stream);
      return testing::to_host_f64(b.out);
    };
    const std::vector<double> ref = run(plain, true);
    EXPECT_EQ(run(dropped, false), ref);
    EXPECT_NE(run(dropped, true), ref);
  }
}

// Rows [begin, begin + n) or columns [begin, begin + n) of a row-major matrix with `cols`
// columns.
std::vector<double> rows_of(const std::vector<double>& m, int64_t cols, int64_t begin, int64_t n) {
  return {m.begin() + begin * cols, m.begin() + (begin + n) * cols};
}

std::vector<double> cols_of(const std::vector<double>& m, int64_t cols, int64_t begin, int64_t n) {
  std::vector<double> v;
  for (size_t r = 0; r < m.size() / static_cast<size_t>(cols); ++r) {
    const auto row = m.begin() + static_cast<int64_t>(r) * cols;
    v.insert(v.end(), row + begin, row + begin + n);
  }
  return v;
}

// W_in rows (or b_in entries) of rank k: its hidden units, of g and of u when gated.
std::vector<double> in_rows(const MlpConfig& one, const std::vector<double>& m, int64_t cols,
                            int64_t k, int64_t f) {
  std::vector<double> v = rows_of(m, cols, k * f, f);
  if (!one.gated()) return v;
  const std::vector<double> u = rows_of(m, cols, one.ffn + k * f, f);
  v.insert(v.end(), u.begin(), u.end());
  return v;
}

void add(std::vector<double>& into, const std::vector<double>& v) {
  for (size_t i = 0; i < v.size(); ++i) into[i] += v[i];
}

TEST(MlpBlock, TensorParallelRanksSumToOneRank) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const int64_t tp = 2, f = kFfn / tp;
  const Tol tol{1e-12, 1e-12};
  for (MlpActivation a : kActivations) {
    const MlpConfig one = config(a, /*bias=*/true, 0.0f);
    SCOPED_TRACE(name(one));
    const Inputs in = random_inputs(one, 11);
    const TensorView dout = pool.from_f64(random(kRows * kD, 12), {kRows, kD});
    Block b = make_block(pool, one, in);
    mlp_forward(one, b.out, b.acts, b.x, b.w, true, kSite, stream);
    mlp_backward(one, b.dx, b.g, dout, b.x, b.acts, b.w, kSite, b.scratch, stream);
    std::vector<double> out(kRows * kD, 0.0), dx(kRows * kD, 0.0);
    for (int64_t k = 0; k < tp; ++k) {
      const MlpConfig c = config(a, true, 0.0f, tp, k);
      Inputs part;
      part.x = in.x;
      part.w_in = in_rows(one, in.w_in, kD, k, f);
      part.b_in = in_rows(one, in.b_in, 1, k, f);
      part.w_out = cols_of(in.w_out, kFfn, k * f, f);
      part.b_out = in.b_out;
      Block rb = make_block(pool, c, part);
      mlp_forward(c, rb.out, rb.acts, rb.x, rb.w, true, kSite, stream);
      mlp_backward(c, rb.dx, rb.g, dout, rb.x, rb.acts, rb.w, kSite, rb.scratch, stream);
      add(out, testing::to_host_f64(rb.out));
      add(dx, testing::to_host_f64(rb.dx));
      EXPECT_TRUE(
          testing::tensors_near(host(rb.g.w_in), in_rows(one, host(b.g.w_in), kD, k, f), tol));
      EXPECT_TRUE(
          testing::tensors_near(host(rb.g.b_in), in_rows(one, host(b.g.b_in), 1, k, f), tol));
      EXPECT_TRUE(
          testing::tensors_near(host(rb.g.w_out), cols_of(host(b.g.w_out), kFfn, k * f, f), tol));
      EXPECT_TRUE(testing::tensors_near(host(rb.g.b_out), host(b.g.b_out), tol));
    }
    EXPECT_TRUE(testing::tensors_near(out, testing::to_host_f64(b.out), tol));
    EXPECT_TRUE(testing::tensors_near(dx, testing::to_host_f64(b.dx), tol));
  }
}

TEST(MlpBlock, SavedActivationPlan) {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  auto take = [&](const std::string& n, DType, const std::vector<int64_t>& shape) {
    names.push_back(n);
    shapes.push_back(shape);
    return TensorView{};
  };
  mlp_saved_acts(config(MlpActivation::kSwiglu, false, 0.0f, 2), 10, DType::kBF16, "L0.mlp.", take);
  mlp_saved_acts(config(MlpActivation::kRelu, false, 0.0f), 10, DType::kBF16, "ffn.", take);
  EXPECT_EQ(names, (std::vector<std::string>{"L0.mlp.pre", "L0.mlp.act", "ffn.pre", "ffn.act"}));
  EXPECT_EQ(shapes, (std::vector<std::vector<int64_t>>{{10, 6}, {10, 3}, {10, 6}, {10, 6}}));
  EXPECT_TRUE(config(MlpActivation::kSwiglu, false, 0.0f).needs_dact());
  EXPECT_TRUE(config(MlpActivation::kRelu, false, 0.1f).needs_dact());
  EXPECT_FALSE(config(MlpActivation::kGeluTanh, true, 0.0f).needs_dact());
}

constexpr int64_t kNormRows = 3, kNormCols = 5;

TEST(NormBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> res = random(kNormRows * kNormCols, 1),
                            r = random(kNormRows * kNormCols, 2);
  const std::vector<double> x0 = random(kNormRows * kNormCols, 3), beta0 = random(kNormCols, 4);
  std::vector<double> gamma0 = random(kNormCols, 5);
  for (double& g : gamma0) g += 1.5;
  for (NormKind kind : {NormKind::kLayerNorm, NormKind::kRmsNorm}) {
    SCOPED_TRACE(kind == NormKind::kLayerNorm ? "layernorm" : "rmsnorm");
    const bool ln = kind == NormKind::kLayerNorm;
    const NormArgs a{kind, kNormRows, kNormCols, 1e-5f};
    // Inputs flattened: x, gamma, beta (LayerNorm).
    std::vector<double> theta = x0;
    theta.insert(theta.end(), gamma0.begin(), gamma0.end());
    if (ln) theta.insert(theta.end(), beta0.begin(), beta0.end());
    struct Run {
      TensorView sum, y, mean, rstd, gamma, beta;
    };
    auto forward = [&](const std::vector<double>& t) {
      Run run;
      const TensorView x =
          pool.from_f64({t.begin(), t.begin() + kNormRows * kNormCols}, {kNormRows, kNormCols});
      const auto g = t.begin() + kNormRows * kNormCols;
      run.gamma = pool.from_f64({g, g + kNormCols}, {kNormCols});
      if (ln) run.beta = pool.from_f64({g + kNormCols, g + 2 * kNormCols}, {kNormCols});
      run.sum = pool.empty(DType::kF64, {kNormRows, kNormCols});
      run.y = pool.empty(DType::kF64, {kNormRows, kNormCols});
      if (ln) run.mean = pool.empty(DType::kF64, {kNormRows});
      run.rstd = pool.empty(DType::kF64, {kNormRows});
      residual_norm_forward(a, run.sum, run.y, run.mean, run.rstd, x,
                            pool.from_f64(res, {kNormRows, kNormCols}), run.gamma, run.beta,
                            stream);
      return run;
    };
    auto loss = [&](const std::vector<double>& t) {
      const std::vector<double> y = testing::to_host_f64(forward(t).y);
      double s = 0.0;
      for (size_t i = 0; i < y.size(); ++i) s += y[i] * r[i];
      return s;
    };
    const Run run = forward(theta);
    const double g0 = 0.25;  // dx (kAdd), dgamma, dbeta start here
    auto filled = [&](int64_t n, std::vector<int64_t> shape) {
      return pool.from_f64(std::vector<double>(static_cast<size_t>(n), g0), std::move(shape));
    };
    const TensorView dx = filled(kNormRows * kNormCols, {kNormRows, kNormCols});
    const TensorView dx_new = pool.empty(DType::kF64, {kNormRows, kNormCols});
    const TensorView dgamma = filled(kNormCols, {kNormCols});
    const TensorView dbeta = ln ? filled(kNormCols, {kNormCols}) : TensorView{};
    const TensorView dy = pool.from_f64(r, {kNormRows, kNormCols});
    norm_backward(a, ops::Accumulate::kAdd, dx, dgamma, dbeta, dy, run.sum, run.gamma, run.mean,
                  run.rstd, {}, stream);
    // = into a fresh dx; the parameter gradients accumulate a second time.
    norm_backward(a, ops::Accumulate::kOverwrite, dx_new, dgamma, dbeta, dy, run.sum, run.gamma,
                  run.mean, run.rstd, {}, stream);
    std::vector<double> got = minus(testing::to_host_f64(dx), g0);
    const std::vector<double> dg = testing::to_host_f64(dgamma);
    for (double v : dg) got.push_back((v - g0) / 2);
    if (ln) {
      for (double v : testing::to_host_f64(dbeta)) got.push_back((v - g0) / 2);
    }
    const std::vector<double> num = testing::numeric_gradient(loss, theta);
    EXPECT_TRUE(testing::tensors_near(got, num, testing::Tol{1e-7, 1e-6}));
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dx_new),
                                      minus(testing::to_host_f64(dx), g0),
                                      testing::Tol{1e-14, 1e-14}));
  }
}

}  // namespace
}  // namespace anvil::model::blocks
