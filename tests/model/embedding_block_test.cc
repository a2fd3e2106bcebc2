// Tests of the embedding block (model/blocks/embedding.h) on the CPU in double.
//  - Gradients: with and without learned positions and token types, the gradients of
//    L = sum(out * r) with respect to wte, wpe and tte against central finite differences
//    (+=); the check fails for a backward that leaves out the position or the type term.
//  - Vocab-parallel over 2 ranks: the ranks' partial outputs sum to the one-rank output (the
//    position and type terms counted once), each rank's d wte is its rows of the one-rank
//    gradient, and d wpe / d tte are the full gradient on every rank.
#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "model/blocks/embedding.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::model::blocks {
namespace {

using engine::Device;
using engine::DType;
using engine::TensorView;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

constexpr int64_t kRows = 5, kD = 3, kVocab = 6, kPos = 4, kTypes = 2;
const std::vector<int32_t> kTokens = {5, 0, 2, 2, 3}, kPositions = {0, 1, 3, 2, 0},
                           kTypeIds = {1, 0, 0, 1, 1};

EmbeddingConfig config(bool positions, bool types, int64_t tp = 1, int64_t rank = 0) {
  EmbeddingConfig c;
  c.rows = kRows;
  c.d_model = kD;
  c.vocab = kVocab;
  c.max_positions = positions ? kPos : 0;
  c.type_vocab = types ? kTypes : 0;
  c.tp = tp;
  c.tp_rank = rank;
  return c;
}

std::vector<double> random(int64_t n, uint64_t seed) {
  const std::vector<float> v = testing::random_uniform(n, seed, -1.0f, 1.0f);
  return {v.begin(), v.end()};
}

// Parameters flattened: wte (this rank's slice), wpe, tte (the optional ones may be empty).
struct Params {
  std::vector<double> wte, wpe, tte;
  std::vector<double> flat() const {
    std::vector<double> v = wte;
    v.insert(v.end(), wpe.begin(), wpe.end());
    v.insert(v.end(), tte.begin(), tte.end());
    return v;
  }
  Params with(const std::vector<double>& v) const {
    Params p = *this;
    size_t at = 0;
    for (std::vector<double>* part : {&p.wte, &p.wpe, &p.tte}) {
      for (double& e : *part) e = v[at++];
    }
    return p;
  }
};

Params random_params(const EmbeddingConfig& c, uint64_t seed) {
  Params p;
  p.wte = random(c.local_vocab() * kD, seed);
  if (c.max_positions > 0) p.wpe = random(kPos * kD, seed + 1);
  if (c.type_vocab > 0) p.tte = random(kTypes * kD, seed + 2);
  return p;
}

struct Lookup {
  TensorView out;
  EmbeddingWeights w, g;
  EmbeddingInputs in;
};

TensorView maybe(TensorPool& pool, const std::vector<double>& v, std::vector<int64_t> shape) {
  return v.empty() ? TensorView{} : pool.from_f64(v, std::move(shape));
}

TensorView filled(TensorPool& pool, const TensorView& like, double g0) {
  if (like.empty()) return {};
  return pool.from_f64(std::vector<double>(static_cast<size_t>(like.numel()), g0),
                       {like.dim(0), like.dim(1)});
}

Lookup forward(TensorPool& pool, TestStream& s, const EmbeddingConfig& c, const Params& p,
               double g0 = 0.0) {
  Lookup r;
  r.w = {pool.from_f64(p.wte, {c.local_vocab(), kD}), maybe(pool, p.wpe, {kPos, kD}),
         maybe(pool, p.tte, {kTypes, kD})};
  r.g = {filled(pool, r.w.wte, g0), filled(pool, r.w.wpe, g0), filled(pool, r.w.tte, g0)};
  r.in = {pool.from_i32(kTokens, {kRows}),
          c.max_positions > 0 ? pool.from_i32(kPositions, {kRows}) : TensorView{},
          c.type_vocab > 0 ? pool.from_i32(kTypeIds, {kRows}) : TensorView{}};
  r.out = pool.empty(DType::kF64, {kRows, kD});
  embedding_forward(c, r.out, r.in, r.w, pool.empty(DType::kF64, {kRows, kD}), s);
  return r;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

std::vector<double> host(const TensorView& v) {
  return v.empty() ? std::vector<double>{} : testing::to_host_f64(v);
}

std::vector<double> minus(std::vector<double> v, double c) {
  for (double& e : v) e -= c;
  return v;
}

TEST(EmbeddingBlock, GradientsMatchFiniteDifferences) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<double> r = random(kRows * kD, 9);
  const double g0 = 0.25;
  for (bool positions : {false, true}) {
    for (bool types : {false, true}) {
      SCOPED_TRACE(std::string(positions ? "positions" : "") + (types ? " types" : ""));
      const EmbeddingConfig c = config(positions, types);
      const Params p = random_params(c, 3);
      auto loss = [&](const std::vector<double>& v) {
        return dot(host(forward(pool, stream, c, p.with(v)).out), r);
      };
      const std::vector<double> num = testing::numeric_gradient(loss, p.flat());
      Lookup run = forward(pool, stream, c, p, g0);
      const TensorView dout = pool.from_f64(r, {kRows, kD});
      embedding_backward(c, run.g, dout, run.in, stream);
      const Params got{minus(host(run.g.wte), g0), minus(host(run.g.wpe), g0),
                       minus(host(run.g.tte), g0)};
      EXPECT_TRUE(testing::tensors_near(got.flat(), num, Tol{1e-8, 1e-7}));
      if (!positions && !types) continue;
      // The check can fail: a backward blind to the optional terms misses their gradients.
      Lookup blind = forward(pool, stream, c, p, g0);
      EmbeddingWeights g = blind.g;
      (positions ? g.wpe : g.tte) = TensorView{};
      embedding_backward(c, g, dout, blind.in, stream);
      const Params miss{minus(host(blind.g.wte), g0), minus(host(blind.g.wpe), g0),
                        minus(host(blind.g.tte), g0)};
      EXPECT_FALSE(testing::tensors_near(miss.flat(), num, Tol{1e-8, 1e-7}));
    }
  }
}

TEST(EmbeddingBlock, VocabParallelRanksSumToOneRank) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const EmbeddingConfig one = config(true, true);
  const Params p = random_params(one, 5);
  const TensorView dout = pool.from_f64(random(kRows * kD, 6), {kRows, kD});
  Lookup ref = forward(pool, stream, one, p);
  embedding_backward(one, ref.g, dout, ref.in, stream);
  const int64_t tp = 2, local = kVocab / tp;
  const Tol tol{1e-14, 1e-14};
  std::vector<double> sum(kRows * kD, 0.0);
  for (int64_t k = 0; k < tp; ++k) {
    const EmbeddingConfig c = config(true, true, tp, k);
    Params part = p;
    part.wte = {p.wte.begin() + k * local * kD, p.wte.begin() + (k + 1) * local * kD};
    Lookup run = forward(pool, stream, c, part);
    embedding_backward(c, run.g, dout, run.in, stream);
    const std::vector<double> out = host(run.out);
    for (size_t i = 0; i < sum.size(); ++i) sum[i] += out[i];
    const std::vector<double> dwte = host(ref.g.wte);
    EXPECT_TRUE(testing::tensors_near(
        host(run.g.wte), {dwte.begin() + k * local * kD, dwte.begin() + (k + 1) * local * kD}, tol,
        /*allow_zero_ref=*/true));
    EXPECT_TRUE(testing::tensors_near(host(run.g.wpe), host(ref.g.wpe), tol));
    EXPECT_TRUE(testing::tensors_near(host(run.g.tte), host(ref.g.tte), tol));
  }
  EXPECT_TRUE(testing::tensors_near(sum, host(ref.out), tol));
}

}  // namespace
}  // namespace anvil::model::blocks
