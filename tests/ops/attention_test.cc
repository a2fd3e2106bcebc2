// Tests of causal multi-head self-attention (ops/attention.h):
//   P = softmax(q k^T * scale, j > i masked) (= probs), out = dropout(P) v (= out), dqkv (=).
// The CPU twin's forward against an independent per-head computation in double (with and
// without Philox dropout on the probabilities), its backward against central differences in
// double (the dropout mask depends only on (seed, offset, index), so it is fixed under FD),
// causality, "=" semantics of backward; then the GPU against the CPU twin in bf16 and f32.
#include "ops/attention.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "engine/dtype.h"
#include "engine/philox.h"
#include "gtest/gtest.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

AttentionArgs make_args(int64_t b, int64_t t, int64_t h, int64_t dh, float p = 0.0f) {
  AttentionArgs a;
  a.batch = b;
  a.seq = t;
  a.heads = h;
  a.head_dim = dh;
  a.scale = 1.0f / std::sqrt(static_cast<float>(dh));
  a.dropout_p = p;
  a.seed = 1234;
  a.offset = 17;
  return a;
}

int64_t qkv_elems(const AttentionArgs& a) { return a.batch * a.seq * 3 * a.heads * a.head_dim; }
int64_t out_elems(const AttentionArgs& a) { return a.batch * a.seq * a.heads * a.head_dim; }
int64_t prob_elems(const AttentionArgs& a) { return a.batch * a.heads * a.seq * a.seq; }

// Independent forward in double: gather one head's q, k, v matrices, then the textbook math.
void reference_forward(const AttentionArgs& a, const std::vector<double>& qkv,
                       std::vector<double>* out, std::vector<double>* probs) {
  const int64_t T = a.seq, Dh = a.head_dim, hd = a.heads * Dh;
  out->assign(out_elems(a), 0.0);
  probs->assign(prob_elems(a), 0.0);
  const double keep_scale = 1.0 / (1.0 - static_cast<double>(a.dropout_p));
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < a.heads; ++h) {
      auto at = [&](int part, int64_t t, int64_t d) {
        return qkv[(b * T + t) * 3 * hd + part * hd + h * Dh + d];
      };
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(i + 1);
        double mx = -1e300, sum = 0;
        for (int64_t j = 0; j <= i; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += at(0, i, d) * at(1, j, d);
          s[j] = dot * a.scale;
          mx = std::max(mx, s[j]);
        }
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - mx);
        const int64_t row = ((b * a.heads + h) * T + i) * T;
        for (int64_t j = 0; j <= i; ++j) {
          const double p = std::exp(s[j] - mx) / sum;
          (*probs)[row + j] = p;
          double pd = p;
          if (a.dropout_p > 0.0f) {
            const bool keep = engine::philox_uniform_at(a.seed, a.offset, row + j) >= a.dropout_p;
            pd = keep ? p * keep_scale : 0.0;
          }
          for (int64_t d = 0; d < Dh; ++d)
            (*out)[(b * T + i) * hd + h * Dh + d] += pd * at(2, j, d);
        }
      }
    }
  }
}

// ---- CPU twin -----------------------------------------------------------------------------------

void check_cpu_forward(const AttentionArgs& a, DType dtype, Tol tol) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = testing::random_uniform(qkv_elems(a), 3, -1.5f, 1.5f);
  TensorView qkv = pool.from(x, dtype, {a.batch * a.seq, 3 * a.heads * a.head_dim});
  TensorView out = pool.empty(dtype, {a.batch * a.seq, a.heads * a.head_dim});
  TensorView probs = pool.empty(dtype, {a.batch, a.heads, a.seq, a.seq});
  attention_forward(a, out, probs, qkv, {}, stream);
  std::vector<double> ref_out, ref_probs;
  reference_forward(a, std::vector<double>(x.begin(), x.end()), &ref_out, &ref_probs);
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(out), ref_out, tol));
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(probs), ref_probs, tol));
  // Rows sum to one; everything above the diagonal is exactly zero.
  const std::vector<double> p = testing::to_host_f64(probs);
  for (int64_t r = 0; r < a.batch * a.heads * a.seq; ++r) {
    const int64_t i = r % a.seq;
    double sum = 0;
    for (int64_t j = 0; j < a.seq; ++j) {
      sum += p[r * a.seq + j];
      if (j > i) {
        EXPECT_EQ(p[r * a.seq + j], 0.0);
      }
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST(AttentionCpu, ForwardMatchesReference) {
  for (float p : {0.0f, 0.25f}) {
    SCOPED_TRACE(::testing::Message() << "dropout_p=" << p);
    check_cpu_forward(make_args(2, 5, 2, 3, p), DType::kF64, Tol{1e-12, 1e-12, 1e-20});
    check_cpu_forward(make_args(2, 7, 3, 4, p), DType::kF32, Tol{1e-5, 1e-5, 1e-10});
  }
}

// Backward of the f64 twin against central differences of L = sum(out * W).
void check_cpu_backward_fd(const AttentionArgs& a) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const int64_t bt = a.batch * a.seq, hd = a.heads * a.head_dim;
  const std::vector<float> x0f = testing::random_uniform(qkv_elems(a), 7, -1.5f, 1.5f);
  const std::vector<float> wf = testing::random_uniform(out_elems(a), 8);
  const std::vector<double> x0(x0f.begin(), x0f.end());
  TensorView qkv = pool.from_f64(x0, {bt, 3 * hd});
  TensorView out = pool.empty(DType::kF64, {bt, hd});
  TensorView probs = pool.empty(DType::kF64, {a.batch, a.heads, a.seq, a.seq});
  TensorView w = pool.from(wf, DType::kF64, {bt, hd});
  const double* wp = static_cast<const double*>(w.data);
  auto loss = [&](const std::vector<double>& x) {
    std::memcpy(qkv.data, x.data(), x.size() * sizeof(double));
    attention_forward(a, out, probs, qkv, {}, stream);
    const double* o = static_cast<const double*>(out.data);
    double l = 0;
    for (int64_t i = 0; i < out_elems(a); ++i) l += o[i] * wp[i];
    return l;
  };
  const std::vector<double> numeric = testing::numeric_gradient(loss, x0);
  loss(x0);  // forward at x0 (probs saved)
  TensorView dqkv = pool.empty(DType::kF64, {bt, 3 * hd});
  attention_backward(a, dqkv, w, qkv, probs, {}, stream);
  const std::vector<double> analytic = testing::to_host_f64(dqkv);
  EXPECT_TRUE(testing::tensors_near(analytic, numeric, Tol{1e-7, 1e-6, 1e-12}));
  // q, k and v parts all carry gradient.
  for (int part = 0; part < 3; ++part) {
    double norm = 0;
    for (int64_t r = 0; r < bt; ++r)
      for (int64_t c = 0; c < hd; ++c) norm += std::fabs(analytic[r * 3 * hd + part * hd + c]);
    EXPECT_GT(norm, 0.0) << "part " << part;
  }
  // "=": a second backward into the same buffer gives the same values, not twice.
  attention_backward(a, dqkv, w, qkv, probs, {}, stream);
  EXPECT_EQ(testing::to_host_f64(dqkv), analytic);
}

TEST(AttentionCpu, BackwardMatchesFiniteDifferences) {
  check_cpu_backward_fd(make_args(2, 5, 2, 3));
}

TEST(AttentionCpu, BackwardWithDropoutMatchesFiniteDifferences) {
  check_cpu_backward_fd(make_args(2, 5, 2, 3, 0.3f));
}

TEST(AttentionCpu, FutureTokensDoNotChangeEarlierOutputs) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const AttentionArgs a = make_args(2, 6, 2, 4, 0.2f);
  const int64_t bt = a.batch * a.seq, hd = a.heads * a.head_dim, T = a.seq;
  const std::vector<float> xf = testing::random_uniform(qkv_elems(a), 9);
  std::vector<double> x(xf.begin(), xf.end());
  auto run = [&](const std::vector<double>& in, std::vector<double>* o, std::vector<double>* p) {
    TensorView out = pool.empty(DType::kF64, {bt, hd});
    TensorView probs = pool.empty(DType::kF64, {a.batch, a.heads, T, T});
    attention_forward(a, out, probs, pool.from_f64(in, {bt, 3 * hd}), {}, stream);
    *o = testing::to_host_f64(out);
    *p = testing::to_host_f64(probs);
  };
  std::vector<double> out0, probs0, out1, probs1;
  run(x, &out0, &probs0);
  // Change q, k and v of token t = 3 of batch 1.
  const int64_t b = 1, t = 3;
  for (int64_t c = 0; c < 3 * hd; ++c) x[(b * T + t) * 3 * hd + c] += 0.5;
  run(x, &out1, &probs1);
  for (int64_t bb = 0; bb < a.batch; ++bb) {
    for (int64_t i = 0; i < T; ++i) {
      const bool may_change = bb == b && i >= t;
      bool same = true;
      for (int64_t c = 0; c < hd; ++c)
        same &= out0[(bb * T + i) * hd + c] == out1[(bb * T + i) * hd + c];
      for (int64_t h = 0; h < a.heads; ++h)
        for (int64_t j = 0; j < T; ++j) {
          const int64_t k = ((bb * a.heads + h) * T + i) * T + j;
          same &= probs0[k] == probs1[k];
        }
      if (may_change) {
        EXPECT_FALSE(same) << "batch " << bb << " row " << i << " should see token " << t;
      } else {
        EXPECT_TRUE(same) << "batch " << bb << " row " << i << " changed by a future token";
      }
    }
  }
}

// ---- GPU vs CPU twin ----------------------------------------------------------------------------

// atol scaled to the reference's RMS: dq, dk, dv and out have very different magnitudes.
Tol rms_tol(const std::vector<float>& ref, double rel_atol, double rtol, double nmse) {
  double s = 0;
  for (float v : ref) s += static_cast<double>(v) * v;
  const double rms = ref.empty() ? 0.0 : std::sqrt(s / static_cast<double>(ref.size()));
  return Tol{rel_atol * rms, rtol, nmse};
}

// Columns of part `part` (0 q, 1 k, 2 v) of a [rows, 3*hd] matrix.
std::vector<float> part_of(const std::vector<float>& m, int64_t rows, int64_t hd, int part) {
  std::vector<float> r;
  r.reserve(rows * hd);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t c = 0; c < hd; ++c) r.push_back(m[i * 3 * hd + part * hd + c]);
  return r;
}

struct GpuTols {
  Tol probs;
  double rel_atol, rtol, nmse;  // out and each of dq, dk, dv (atol relative to RMS)
};

// bf16: probabilities are stored in bf16 (relative 2^-9, absolute <= 2e-3 for P <= 1); out and
// the gradients pass through bf16 P', dS and bf16 GEMM outputs, ~0.5% relative RMS error.
constexpr GpuTols kBf16Tols{Tol{2e-3, 1e-2, 1e-4}, 3e-2, 3e-2, 5e-4};
// f32: full fp32 GEMMs; only summation order and expf differ.
constexpr GpuTols kF32Tols{Tol{1e-6, 1e-5, 1e-10}, 1e-4, 1e-4, 1e-8};

void check_gpu(const AttentionArgs& a, DType act, const GpuTols& tol) {
  TestStream gpu(Device::kCuda);
  TestStream cpu(Device::kCpu);
  TensorPool gpool(Device::kCuda);
  TensorPool cpool(Device::kCpu);
  const int64_t bt = a.batch * a.seq, hd = a.heads * a.head_dim;
  std::vector<float> x = testing::random_uniform(qkv_elems(a), 41, -1.5f, 1.5f);
  std::vector<float> dy = testing::random_uniform(out_elems(a), 42);
  if (act == DType::kBF16) {
    x = testing::round_bf16(x);
    dy = testing::round_bf16(dy);
  }
  struct Run {
    TensorView out, probs, dqkv;
  };
  auto run = [&](TensorPool& pool, Stream& s, DType t, engine::Workspace ws) {
    Run r;
    TensorView qkv = pool.from(x, t, {bt, 3 * hd});
    r.out = pool.empty(t, {bt, hd});
    r.probs = pool.empty(t, {a.batch, a.heads, a.seq, a.seq});
    r.dqkv = pool.empty(t, {bt, 3 * hd});
    attention_forward(a, r.out, r.probs, qkv, ws, s);
    attention_backward(a, r.dqkv, pool.from(dy, t, {bt, hd}), qkv, r.probs, ws, s);
    return r;
  };
  const Run got = run(gpool, gpu, act, gpool.workspace(attention_workspace_bytes(a)));
  const Run ref = run(cpool, cpu, DType::kF32, {});
  gpu.get().synchronize();
  EXPECT_TRUE(
      testing::tensors_near(testing::to_host(got.probs), testing::to_host(ref.probs), tol.probs))
      << "probs";
  const std::vector<float> ref_out = testing::to_host(ref.out);
  EXPECT_TRUE(testing::tensors_near(testing::to_host(got.out), ref_out,
                                    rms_tol(ref_out, tol.rel_atol, tol.rtol, tol.nmse)))
      << "out";
  const std::vector<float> g = testing::to_host(got.dqkv), r = testing::to_host(ref.dqkv);
  const char* names[] = {"dq", "dk", "dv"};
  for (int part = 0; part < 3; ++part) {
    const std::vector<float> rp = part_of(r, bt, hd, part);
    // With T = 1 the softmax is constant (P = [1]): dq and dk are exactly zero.
    const bool allow_zero = a.seq == 1 && part < 2;
    EXPECT_TRUE(testing::tensors_near(part_of(g, bt, hd, part), rp,
                                      rms_tol(rp, tol.rel_atol, tol.rtol, tol.nmse), allow_zero))
        << names[part];
  }
}

TEST(AttentionGpu, Bf16OddShapes) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (float p : {0.0f, 0.1f}) {
    SCOPED_TRACE(::testing::Message() << "dropout_p=" << p);
    check_gpu(make_args(2, 37, 3, 16, p), DType::kBF16, kBf16Tols);
    check_gpu(make_args(1, 5, 2, 3, p), DType::kBF16, kBf16Tols);
  }
}

TEST(AttentionGpu, Bf16Gpt2LikeHeads) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_gpu(make_args(2, 128, 4, 64, 0.1f), DType::kBF16, kBf16Tols);
  check_gpu(make_args(1, 256, 2, 64, 0.0f), DType::kBF16, kBf16Tols);
}

TEST(AttentionGpu, F32Tight) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_gpu(make_args(2, 37, 3, 16, 0.1f), DType::kF32, kF32Tols);
  check_gpu(make_args(3, 9, 2, 5, 0.0f), DType::kF32, kF32Tols);
  check_gpu(make_args(1, 1, 1, 8, 0.0f), DType::kF32, kF32Tols);  // T = 1: P = [1]
}

}  // namespace
}  // namespace anvil::ops
