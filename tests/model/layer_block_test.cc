// Tests of the transformer layer block (model/blocks/layer.h) on the CPU in double, one TP rank.
//  - Gradients: a GPT-like pre-LN layer (LayerNorm, biases, causal ALiBi attention, GELU,
//    hidden and attention dropout), a T5-like decoder layer (RMSNorm, relative-bucket causal
//    self-attention, cross-attention over a padded memory, ReLU with activation dropout) and a
//    BERT-like post-LN layer (padding mask, GELU-erf): the gradients of L = sum(y * r) (y = the
//    layer output: h' + Drop(mlp) pre-LN, out post-LN) with respect to x, the memory and every
//    weight against central finite differences; parameter gradients and d memory accumulate
//    (+=). Each check can fail: the backward with another dropout site misses them.
//  - The fused input (pre-LN): a layer fed prev + the pending Drop(mlp) equals the layer fed
//    x = prev + Drop(mlp) directly.
//  - The saved-activation plan: names and rows, RMSNorm without means, post-LN ln1 only under
//    sequence parallelism.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/blocks/layer.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

constexpr int64_t kB = 2, kT = 3, kTk = 2, kD = 4, kDm = 3, kHeads = 2, kDh = 2, kFfn = 5;
constexpr int64_t kRows = kB * kT, kBuckets = 3;

struct Case {
  std::string name;
  LayerConfig c;
  bool bias = false;
  bool lengths = false;
};

AttentionConfig attention(bool cross, bool causal, float dropout) {
  AttentionConfig a;
  a.batch = kB;
  a.q_len = kT;
  a.kv_len = cross ? kTk : kT;
  a.heads = kHeads;
  a.head_dim = kDh;
  a.cross = cross;
  a.causal = causal;
  a.scale = 0.8f;
  a.dropout = dropout;
  return a;
}

MlpConfig mlp(MlpActivation act, bool bias, float dropout) {
  MlpConfig m;
  m.d_model = kD;
  m.ffn = kFfn;
  m.activation = act;
  m.bias = bias;
  m.act_dropout = dropout;
  return m;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  Case gpt{"gpt pre-LN", {}, true, false};
  gpt.c.norm = {NormKind::kLayerNorm, kRows, kD, 1e-5f};
  gpt.c.attn = attention(false, true, 0.1f);
  gpt.c.attn.position = AttentionPosition::kAlibi;
  gpt.c.mlp = mlp(MlpActivation::kGeluTanh, true, 0.0f);
  gpt.c.dropout = 0.2f;
  v.push_back(gpt);
  Case t5{"t5 decoder", {}, false, true};
  t5.c.norm = {NormKind::kRmsNorm, kRows, kD, 1e-6f};
  t5.c.attn = attention(false, true, 0.1f);
  t5.c.attn.position = AttentionPosition::kRelativeBuckets;
  t5.c.cross = true;
  t5.c.cross_attn = attention(true, false, 0.1f);
  t5.c.mlp = mlp(MlpActivation::kRelu, false, 0.1f);
  t5.c.dropout = 0.1f;
  v.push_back(t5);
  Case bert{"bert post-LN", {}, true, true};
  bert.c.norm = {NormKind::kLayerNorm, kRows, kD, 1e-5f};
  bert.c.attn = attention(false, false, 0.1f);
  bert.c.mlp = mlp(MlpActivation::kGeluErf, true, 0.0f);
  bert.c.post_ln = true;
  bert.c.dropout = 0.2f;
  v.push_back(bert);
  return v;
}

const LayerSites kSites{99, 0, 40, 80, 120, 160, 200};

// One differentiable tensor of the layer: its shape and where it sits in the weights (or
// nullptr: x or the memory).
struct Field {
  std::vector<int64_t> shape;
  std::function<TensorView&(LayerWeights&)> at;
};

std::vector<Field> fields(const Case& k) {
  const LayerConfig& c = k.c;
  const int64_t I = kHeads * kDh;
  const bool ln = c.norm.kind == NormKind::kLayerNorm;
  std::vector<Field> f;
  auto add = [&](std::vector<int64_t> shape, std::function<TensorView&(LayerWeights&)> at) {
    f.push_back({std::move(shape), std::move(at)});
  };
  add({kD}, [](LayerWeights& w) -> TensorView& { return w.ln1_g; });
  if (ln) add({kD}, [](LayerWeights& w) -> TensorView& { return w.ln1_b; });
  add({kD}, [](LayerWeights& w) -> TensorView& { return w.ln_mlp_g; });
  if (ln) add({kD}, [](LayerWeights& w) -> TensorView& { return w.ln_mlp_b; });
  add({3 * I, kD}, [](LayerWeights& w) -> TensorView& { return w.attn.qkv_w; });
  add({kD, I}, [](LayerWeights& w) -> TensorView& { return w.attn.out_w; });
  if (k.bias) {
    add({3 * I}, [](LayerWeights& w) -> TensorView& { return w.attn.qkv_b; });
    add({kD}, [](LayerWeights& w) -> TensorView& { return w.attn.out_b; });
  }
  if (c.cross) {
    add({kD}, [](LayerWeights& w) -> TensorView& { return w.ln_cross_g; });
    add({I, kD}, [](LayerWeights& w) -> TensorView& { return w.cross.qkv_w; });
    add({2 * I, kDm}, [](LayerWeights& w) -> TensorView& { return w.cross.kv_w; });
    add({kD, I}, [](LayerWeights& w) -> TensorView& { return w.cross.out_w; });
  }
  add({c.mlp.in_width(), kD}, [](LayerWeights& w) -> TensorView& { return w.mlp.w_in; });
  add({kD, c.mlp.local_ffn()}, [](LayerWeights& w) -> TensorView& { return w.mlp.w_out; });
  if (k.bias) {
    add({c.mlp.in_width()}, [](LayerWeights& w) -> TensorView& { return w.mlp.b_in; });
    add({kD}, [](LayerWeights& w) -> TensorView& { return w.mlp.b_out; });
  }
  return f;
}

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::vector<double> random(int64_t n, uint64_t seed) {
  const std::vector<float> v = testing::random_uniform(n, seed, -1.0f, 1.0f);
  return {v.begin(), v.end()};
}

// x, memory (cross), then every field, flattened.
std::vector<double> random_theta(const Case& k, uint64_t seed) {
  std::vector<double> t = random(kRows * kD, seed);
  if (k.c.cross) {
    const std::vector<double> m = random(kB * kTk * kDm, seed + 1);
    t.insert(t.end(), m.begin(), m.end());
  }
  uint64_t i = 2;
  for (const Field& f : fields(k)) {
    std::vector<double> v = random(numel(f.shape), seed + i++);
    if (f.shape.size() == 1 && f.shape[0] == kD) {
      for (double& e : v) e += 1.5;  // norm gains away from 0
    }
    t.insert(t.end(), v.begin(), v.end());
  }
  return t;
}

struct Layer {
  LayerActs a;
  LayerWeights w, g;
  LayerInputs in;
  LayerScratch sc;
  TensorView out, memory;
};

TensorView take(TensorPool& pool, const std::vector<double>& t, size_t& at,
                std::vector<int64_t> shape) {
  const int64_t n = numel(shape);
  const std::vector<double> v(t.begin() + static_cast<int64_t>(at),
                              t.begin() + static_cast<int64_t>(at) + n);
  at += static_cast<size_t>(n);
  return pool.from_f64(v, std::move(shape));
}

Layer make_layer(TensorPool& pool, const Case& k, const std::vector<double>& t, double g0 = 0.0) {
  const LayerConfig& c = k.c;
  Layer L;
  size_t at = 0;
  const TensorView x = take(pool, t, at, {kRows, kD});
  if (c.cross) L.memory = take(pool, t, at, {kB * kTk, kDm});
  for (const Field& f : fields(k)) {
    f.at(L.w) = take(pool, t, at, f.shape);
    f.at(L.g) =
        pool.from_f64(std::vector<double>(static_cast<size_t>(numel(f.shape)), g0), f.shape);
  }
  auto A = [&](const std::string&, DType dt, const std::vector<int64_t>& shape) {
    return pool.empty(dt, shape);
  };
  L.a = layer_saved_acts(c, DType::kF64, DType::kF64, "", A);
  L.a.x = x;  // the input in place of the planned x
  L.out = pool.empty(DType::kF64, {kRows, kD});
  const int64_t I = kHeads * kDh;
  L.sc.proj = pool.empty(DType::kF64, {kRows, kD});
  L.sc.dln = pool.empty(DType::kF64, {kRows, kD});
  L.sc.dbig = pool.empty(DType::kF64, {kRows * 3 * I + kB * kTk * 2 * I});
  L.sc.dact = pool.empty(DType::kF64, {kRows, kFfn});
  L.in.memory = L.memory;
  if (c.cross) {
    L.in.dmemory = pool.from_f64(std::vector<double>(static_cast<size_t>(kB * kTk * kDm), g0),
                                 {kB * kTk, kDm});
  }
  const TensorView lengths = pool.from_i32({2, 1}, {kB});
  if (k.lengths) {
    L.in.attn.masks.kv_lengths = lengths;
    L.in.cross.masks.kv_lengths = lengths;
  }
  if (c.attn.position == AttentionPosition::kRelativeBuckets) {
    L.in.attn.masks.rel_buckets = pool.from_i32({0, 2, 1, 1, 2}, {2 * kT - 1});
    L.in.attn.masks.rel_table =
        pool.from(testing::random_uniform(kBuckets * kHeads, 5), DType::kF32, {kBuckets, kHeads});
    L.in.d_rel_table =
        pool.from(std::vector<float>(kBuckets * kHeads, 0.0f), DType::kF32, {kBuckets, kHeads});
  }
  return L;
}

// The layer output y (pre-LN: last residual + pending Drop(mlp); post-LN: out) as host values.
std::vector<double> output(const Case& k, const Layer& L) {
  if (k.c.post_ln) return testing::to_host_f64(L.out);
  std::vector<double> y = testing::to_host_f64(last_residual(k.c, L.a));
  const std::vector<double> p = testing::to_host_f64(L.sc.proj);
  for (size_t i = 0; i < y.size(); ++i) y[i] += p[i];
  return y;
}

void forward(const Case& k, Layer& L, TestStream& s) {
  layer_forward(k.c, L.a, L.w, L.in, {}, L.out, /*train=*/true, kSites, L.sc, {}, s);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// d x, d memory and the field gradients (minus their start g0), flattened as theta.
std::vector<double> analytic(const Case& k, Layer& L, const TensorView& dres, double g0) {
  std::vector<double> got = testing::to_host_f64(dres);
  auto append = [&](const TensorView& v) {
    for (double e : testing::to_host_f64(v)) got.push_back(e - g0);
  };
  if (k.c.cross) append(L.in.dmemory);
  for (const Field& f : fields(k)) append(f.at(L.g));
  return got;
}

TEST(LayerBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const double g0 = 0.5;
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.name);
    const std::vector<double> theta = random_theta(k, 11);
    const std::vector<double> r = random(kRows * kD, 12);
    auto loss = [&](const std::vector<double>& t) {
      Layer L = make_layer(pool, k, t);
      forward(k, L, stream);
      return dot(output(k, L), r);
    };
    const std::vector<double> num = testing::numeric_gradient(loss, theta);
    auto backward = [&](const LayerSites& sites) {
      Layer L = make_layer(pool, k, theta, g0);
      forward(k, L, stream);
      const TensorView dres = pool.from_f64(r, {kRows, kD});
      layer_backward(k.c, dres, L.g, L.a, L.w, L.in, sites, L.sc, {}, stream);
      return analytic(k, L, dres, g0);
    };
    const std::vector<double> got = backward(kSites);
    EXPECT_GT(dot(got, got), 1e-3);
    EXPECT_TRUE(testing::tensors_near(got, num, Tol{1e-6, 1e-5}));
    LayerSites moved = kSites;
    moved.mlp_out += 1000;
    EXPECT_FALSE(testing::tensors_near(backward(moved), num, Tol{1e-4, 1e-3}));
  }
}

TEST(LayerBlock, FusedInputMatchesGivenInput) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  for (const Case& k : cases()) {
    if (k.c.post_ln) continue;
    SCOPED_TRACE(k.name);
    const std::vector<double> theta = random_theta(k, 21);
    Layer first = make_layer(pool, k, theta);
    forward(k, first, stream);
    const std::vector<double> y = output(k, first);
    // The same weights, input y given as x vs fused from (last residual, pending proj).
    std::vector<double> given_theta = theta;
    std::copy(y.begin(), y.end(), given_theta.begin());
    Layer given = make_layer(pool, k, given_theta);
    forward(k, given, stream);
    Layer fused = make_layer(pool, k, theta);
    fused.sc = first.sc;  // the pending Drop(mlp) is in the scratch's proj
    layer_forward(k.c, fused.a, fused.w, fused.in, last_residual(k.c, first.a), fused.out, true,
                  kSites, fused.sc, {}, stream);
    const Tol tol{1e-14, 1e-14};
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(fused.a.x), y, tol));
    EXPECT_TRUE(testing::tensors_near(output(k, fused), output(k, given), tol));
  }
}

TEST(LayerBlock, SavedActivationPlan) {
  std::vector<std::string> names;
  auto take = [&](const std::string& n, DType, const std::vector<int64_t>& shape) {
    names.push_back(n + " " + std::to_string(shape[0]));
    return TensorView{};
  };
  const std::vector<Case> all = cases();
  layer_saved_acts(all[1].c, DType::kBF16, DType::kF32, "d0.", take);  // T5 decoder: RMSNorm
  EXPECT_EQ(names,
            (std::vector<std::string>{
                "d0.x 6", "d0.ln1 6", "d0.ln1.rstd 6", "d0.attn.qkv 6", "d0.attn.attn.lse 2",
                "d0.attn.att 6", "d0.h 6", "d0.ln_cross 6", "d0.ln_cross.rstd 6", "d0.cross.qkv 6",
                "d0.cross.kv 4", "d0.cross.attn.lse 2", "d0.cross.att 6", "d0.hc 6", "d0.ln_mlp 6",
                "d0.ln_mlp.rstd 6", "d0.mlp.pre 6", "d0.mlp.act 6"}));
  names.clear();
  LayerConfig post = all[2].c;  // BERT post-LN, sequence parallel over 2 ranks: 3 own rows
  post.norm.rows = kRows / 2;
  layer_saved_acts(post, DType::kBF16, DType::kF32, "", take);
  EXPECT_EQ(names, (std::vector<std::string>{"x 3", "ln1 6", "ln1.mean 3", "ln1.rstd 3",
                                             "attn.qkv 6", "attn.attn.lse 2", "attn.att 6", "h 3",
                                             "ln_mlp 6", "ln_mlp.mean 3", "ln_mlp.rstd 3",
                                             "mlp.pre 6", "mlp.act 6", "post_sum 3"}));
}

}  // namespace
}  // namespace anvil::model::blocks
