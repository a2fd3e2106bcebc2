// Tests of token + learned position embedding (ops/embedding.h):
//   out[t] = wte[tokens[t]] + wpe[positions[t]] (=);  dwte/dwpe[id] += dout[t] (+=)
// CPU twin: closed form, central finite differences in double, += (2x), argument checks.
// GPU: against the CPU twin on random data with repeated ids, bf16 and f32, awkward shapes.
#include "ops/embedding.h"

#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/memory.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

std::vector<double> as_f64(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0.0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

double norm2(const std::vector<double>& a) { return dot(a, a); }

TEST(EmbeddingCpu, ForwardIsRowSum) {
  const EmbeddingArgs args{6, 5, 7, 4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<int32_t> tok = {3, 0, 6, 3, 3, 1}, pos = {0, 1, 2, 3, 0, 2};
  const std::vector<float> wte = testing::random_uniform(7 * 5, 1);
  const std::vector<float> wpe = testing::random_uniform(4 * 5, 2);
  TensorView out = pool.empty(DType::kF32, {6, 5});
  embedding_forward(args, out, pool.from_i32(tok, {6}), pool.from_i32(pos, {6}),
                    pool.from(wte, DType::kF32, {7, 5}), pool.from(wpe, DType::kF32, {4, 5}),
                    stream);
  const std::vector<float> got = testing::to_host(out);
  for (int t = 0; t < 6; ++t) {
    for (int c = 0; c < 5; ++c) {
      EXPECT_EQ(got[t * 5 + c], wte[tok[t] * 5 + c] + wpe[pos[t] * 5 + c]) << t << "," << c;
    }
  }
}

// L = sum(out * w); dL/dwte and dL/dwpe from backward(dout = w) against central differences.
TEST(EmbeddingCpu, BackwardMatchesFiniteDifferences) {
  const EmbeddingArgs args{6, 5, 7, 4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView tok = pool.from_i32({3, 0, 6, 3, 3, 1}, {6});
  const TensorView pos = pool.from_i32({0, 1, 2, 3, 0, 2}, {6});
  const std::vector<double> wte0 = as_f64(testing::random_uniform(7 * 5, 3));
  const std::vector<double> wpe0 = as_f64(testing::random_uniform(4 * 5, 4));
  const std::vector<double> w = as_f64(testing::random_uniform(6 * 5, 5));
  TensorView wte = pool.from_f64(wte0, {7, 5});
  TensorView wpe = pool.from_f64(wpe0, {4, 5});
  TensorView out = pool.empty(DType::kF64, {6, 5});

  auto loss = [&](const std::vector<double>& te, const std::vector<double>& pe) {
    std::memcpy(wte.data, te.data(), te.size() * sizeof(double));
    std::memcpy(wpe.data, pe.data(), pe.size() * sizeof(double));
    embedding_forward(args, out, tok, pos, wte, wpe, stream);
    return dot(testing::to_host_f64(out), w);
  };
  const std::vector<double> num_te =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(v, wpe0); }, wte0);
  const std::vector<double> num_pe =
      testing::numeric_gradient([&](const std::vector<double>& v) { return loss(wte0, v); }, wpe0);

  TensorView dwte = pool.from_f64(std::vector<double>(7 * 5, 0.0), {7, 5});
  TensorView dwpe = pool.from_f64(std::vector<double>(4 * 5, 0.0), {4, 5});
  embedding_backward(args, dwte, dwpe, pool.from_f64(w, {6, 5}), tok, pos, stream);
  const std::vector<double> g_te = testing::to_host_f64(dwte), g_pe = testing::to_host_f64(dwpe);
  EXPECT_GT(norm2(g_te), 0.0);
  EXPECT_GT(norm2(g_pe), 0.0);
  // Row 2 of wte, 4 and 5 are unused: their gradient is exactly zero.
  for (int c = 0; c < 5; ++c) EXPECT_EQ(g_te[2 * 5 + c], 0.0);
  EXPECT_TRUE(testing::tensors_near(g_te, num_te, Tol{1e-8, 1e-7}));
  EXPECT_TRUE(testing::tensors_near(g_pe, num_pe, Tol{1e-8, 1e-7}));

  // += : a second call doubles (exact in double).
  embedding_backward(args, dwte, dwpe, pool.from_f64(w, {6, 5}), tok, pos, stream);
  const std::vector<double> g2 = testing::to_host_f64(dwte);
  for (size_t i = 0; i < g2.size(); ++i) EXPECT_EQ(g2[i], 2.0 * g_te[i]) << i;
}

TEST(EmbeddingCpu, BackwardAccumulatesIntoF32) {
  const EmbeddingArgs args{4, 3, 5, 4};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> start = testing::random_uniform(5 * 3, 6);
  const std::vector<float> dout = testing::random_uniform(4 * 3, 7);
  TensorView dwte = pool.from(start, DType::kF32, {5, 3});
  TensorView dwpe = pool.from(std::vector<float>(4 * 3, 0.0f), DType::kF32, {4, 3});
  embedding_backward(args, dwte, dwpe, pool.from(dout, DType::kBF16, {4, 3}),
                     pool.from_i32({1, 4, 1, 0}, {4}), pool.from_i32({0, 1, 2, 3}, {4}), stream);
  const std::vector<float> d = testing::round_bf16(dout);
  const std::vector<float> got = testing::to_host(dwte);
  for (int c = 0; c < 3; ++c) {
    EXPECT_EQ(got[1 * 3 + c], (start[1 * 3 + c] + d[0 * 3 + c]) + d[2 * 3 + c]);
    EXPECT_EQ(got[4 * 3 + c], start[4 * 3 + c] + d[1 * 3 + c]);
    EXPECT_EQ(got[2 * 3 + c], start[2 * 3 + c]);
  }
}

TEST(EmbeddingCpuDeathTest, RejectsBadArguments) {
  const EmbeddingArgs args{2, 4, 3, 2};
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const TensorView wte = pool.from(testing::random_uniform(12, 8), DType::kF32, {3, 4});
  const TensorView wpe = pool.from(testing::random_uniform(8, 9), DType::kF32, {2, 4});
  const TensorView pos = pool.from_i32({0, 1}, {2});
  TensorView out = pool.empty(DType::kF32, {2, 4});
  EXPECT_DEATH(embedding_forward(args, out, pool.from_i32({0, 3}, {2}), pos, wte, wpe, stream),
               "tokens\\[1\\] = 3 is outside");
  EXPECT_DEATH(
      embedding_forward(args, pool.empty(DType::kBF16, {2, 4}), pos, pos, wte, wpe, stream),
      "out must be");
  TensorView dwte = pool.empty(DType::kBF16, {3, 4});
  EXPECT_DEATH(
      embedding_backward(args, dwte, pool.empty(DType::kF32, {2, 4}), out, pos, pos, stream),
      "dwte must be");
}

// ---------------------------------------------------------------------------------------------
// GPU vs CPU twin.

struct GpuCase {
  int64_t tokens, dim, vocab, max_pos;
  DType dtype;
};

class EmbeddingGpu : public ::testing::TestWithParam<GpuCase> {};

TEST_P(EmbeddingGpu, MatchesCpuTwin) {
  ANVIL_SKIP_WITHOUT_GPU();
  const GpuCase& p = GetParam();
  const EmbeddingArgs args{p.tokens, p.dim, p.vocab, p.max_pos};
  TestStream cs(Device::kCpu), gs(Device::kCuda);
  TensorPool cpool(Device::kCpu), gpool(Device::kCuda);
  // Few distinct ids: many repeats, so the atomic scatter really accumulates.
  const std::vector<int32_t> tok =
      testing::random_ints(p.tokens, 11, 0, static_cast<int32_t>(std::min<int64_t>(p.vocab, 9)));
  const std::vector<int32_t> pos = testing::random_ints(p.tokens, 12, 0, p.max_pos);
  const std::vector<float> wte = testing::random_uniform(p.vocab * p.dim, 13);
  const std::vector<float> wpe = testing::random_uniform(p.max_pos * p.dim, 14);
  const std::vector<float> dout = testing::random_uniform(p.tokens * p.dim, 15);
  const std::vector<float> dwte0 = testing::random_uniform(p.vocab * p.dim, 16);
  const std::vector<float> dwpe0 = testing::random_uniform(p.max_pos * p.dim, 17);

  TensorView c_out = cpool.empty(p.dtype, {p.tokens, p.dim});
  TensorView g_out = gpool.empty(p.dtype, {p.tokens, p.dim});
  embedding_forward(args, c_out, cpool.from_i32(tok, {p.tokens}), cpool.from_i32(pos, {p.tokens}),
                    cpool.from(wte, p.dtype, {p.vocab, p.dim}),
                    cpool.from(wpe, p.dtype, {p.max_pos, p.dim}), cs);
  embedding_forward(args, g_out, gpool.from_i32(tok, {p.tokens}), gpool.from_i32(pos, {p.tokens}),
                    gpool.from(wte, p.dtype, {p.vocab, p.dim}),
                    gpool.from(wpe, p.dtype, {p.max_pos, p.dim}), gs);
  // Both add two identical values in (at least) f32 and round once: exact.
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(g_out), testing::to_host(c_out), Tol{0.0, 0.0, 0.0}));

  TensorView c_dwte = cpool.from(dwte0, DType::kF32, {p.vocab, p.dim});
  TensorView c_dwpe = cpool.from(dwpe0, DType::kF32, {p.max_pos, p.dim});
  TensorView g_dwte = gpool.from(dwte0, DType::kF32, {p.vocab, p.dim});
  TensorView g_dwpe = gpool.from(dwpe0, DType::kF32, {p.max_pos, p.dim});
  embedding_backward(args, c_dwte, c_dwpe, cpool.from(dout, p.dtype, {p.tokens, p.dim}),
                     cpool.from_i32(tok, {p.tokens}), cpool.from_i32(pos, {p.tokens}), cs);
  embedding_backward(args, g_dwte, g_dwpe, gpool.from(dout, p.dtype, {p.tokens, p.dim}),
                     gpool.from_i32(tok, {p.tokens}), gpool.from_i32(pos, {p.tokens}), gs);
  // Same f32 addends summed in another order (atomics): f32 rounding only, a few ulp of the
  // running sum (|sum| <~ tokens / 9 with values in [-1, 1)).
  const double atol = 1e-6 * static_cast<double>(p.tokens);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(g_dwte), testing::to_host(c_dwte),
                                    Tol{atol, 1e-5, 1e-10}));
  EXPECT_TRUE(testing::tensors_near(testing::to_host(g_dwpe), testing::to_host(c_dwpe),
                                    Tol{atol, 1e-5, 1e-10}));
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, EmbeddingGpu,
    ::testing::Values(GpuCase{1, 8, 5, 3, DType::kBF16}, GpuCase{1, 8, 5, 3, DType::kF32},
                      GpuCase{256, 768, 1000, 128, DType::kBF16},
                      GpuCase{256, 768, 1000, 128, DType::kF32},
                      GpuCase{37, 13, 50, 40, DType::kBF16},  // dim % 8 != 0: scalar path
                      GpuCase{37, 13, 50, 40, DType::kF32},
                      GpuCase{9, 4100, 17, 9, DType::kBF16},  // 4100 % 8 != 0, % 4 == 0
                      GpuCase{9, 4100, 17, 9, DType::kF32}));

}  // namespace
}  // namespace anvil::ops
