// Tests of the row-major strided-batched GEMM with epilogues and of bias_backward (ops/gemm.h):
//   D[b] = epilogue(alpha * op(A[b]) op(B[b]) + beta * D[b]);  dbias[n] += sum_rows dy
// The CPU twin (OpenBLAS) against a naive triple loop in double for every trans combination,
// batches with padded strides, beta = 1 accumulation and each epilogue (kDGelu against central
// differences of gelu_tanh); then the GPU (cuBLASLt) against the CPU twin for bf16 -> bf16,
// bf16 -> f32 with beta = 1, f32, fused and fallback epilogues, odd and GPT-2-sized shapes.
// The cuBLASLt plan cache: its key on the CPU (ops/gemm_plan.h), and on the GPU repeated and
// interleaved shapes, and misaligned operands, against the CPU twin.
#include "ops/gemm.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>
#include <vector>

#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "ops/gemm_plan.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

double gelu_ref(double x) {
  return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / std::acos(-1.0)) * (x + 0.044715 * x * x * x)));
}
double gelu_grad_fd(double x) {
  const double h = 1e-5;
  return (gelu_ref(x + h) - gelu_ref(x - h)) / (2 * h);
}

// Stored element counts of the operands of one batch entry.
int64_t a_elems(const GemmArgs& g) { return g.m * g.k; }
int64_t b_elems(const GemmArgs& g) { return g.k * g.n; }
int64_t stride_or(int64_t stride, int64_t packed) { return stride ? stride : packed; }
int64_t total_elems(int64_t batch, int64_t stride, int64_t packed) {
  return (batch - 1) * stride_or(stride, packed) + packed;
}

// The naive definition in double: D = epilogue(alpha op(A) op(B) + beta D0); also pre_gelu.
struct NaiveResult {
  std::vector<double> d, pre;
};
NaiveResult naive_gemm(const GemmArgs& g, const std::vector<double>& a,
                       const std::vector<double>& b, const std::vector<double>& d0,
                       const std::vector<double>& bias, const std::vector<double>& pre_in) {
  const int64_t sa = stride_or(g.stride_a, a_elems(g)), sb = stride_or(g.stride_b, b_elems(g));
  const int64_t sd = stride_or(g.stride_d, g.m * g.n);
  NaiveResult r{d0, pre_in};
  for (int64_t bt = 0; bt < g.batch; ++bt) {
    for (int64_t i = 0; i < g.m; ++i) {
      for (int64_t j = 0; j < g.n; ++j) {
        double acc = 0;
        for (int64_t p = 0; p < g.k; ++p) {
          const double av = g.trans_a ? a[bt * sa + p * g.m + i] : a[bt * sa + i * g.k + p];
          const double bv = g.trans_b ? b[bt * sb + j * g.k + p] : b[bt * sb + p * g.n + j];
          acc += av * bv;
        }
        const int64_t di = bt * sd + i * g.n + j;
        double v = g.alpha * acc + (g.beta != 0.0f ? g.beta * d0[di] : 0.0);
        switch (g.epilogue) {
          case Epilogue::kNone:
          case Epilogue::kBiasGradA:  // d is the plain product (the bias sums are separate)
            break;
          case Epilogue::kBias:
            v += bias[j];
            break;
          case Epilogue::kBiasGelu:
            r.pre[i * g.n + j] = v + bias[j];
            v = gelu_ref(v + bias[j]);
            break;
          case Epilogue::kDGelu:
            v *= gelu_grad_fd(pre_in[i * g.n + j]);
            break;
        }
        r.d[di] = v;
      }
    }
  }
  return r;
}

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// Runs the CPU twin in `dtype` (f32/f64) on random data and compares with the naive loop.
void check_cpu(const GemmArgs& g, DType dtype, Tol tol) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const int64_t na = total_elems(g.batch, g.stride_a, a_elems(g));
  const int64_t nb = total_elems(g.batch, g.stride_b, b_elems(g));
  const int64_t nd = total_elems(g.batch, g.stride_d, g.m * g.n);
  const std::vector<float> a = testing::random_uniform(na, 11);
  const std::vector<float> b = testing::random_uniform(nb, 12);
  const std::vector<float> d0 = testing::random_uniform(nd, 13);
  const std::vector<float> bias = testing::random_uniform(g.n, 14);
  const std::vector<float> pre = testing::random_uniform(g.m * g.n, 15, -3.0f, 3.0f);
  const bool has_bias = g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu;
  const bool has_pre = g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu;
  // Beta = 0 must ignore D's old contents: start from poison (NaN) then.
  TensorView d = g.beta != 0.0f ? pool.from(d0, dtype, {nd}) : pool.empty(dtype, {nd});
  TensorView pre_t = g.epilogue == Epilogue::kDGelu ? pool.from(pre, dtype, {g.m, g.n})
                     : has_pre                      ? pool.empty(dtype, {g.m, g.n})
                                                    : TensorView{};
  gemm(g, d, pool.from(a, dtype, {na}), pool.from(b, dtype, {nb}),
       has_bias ? ConstTensorView(pool.from(bias, dtype, {g.n})) : ConstTensorView{}, pre_t,
       stream);
  const NaiveResult ref =
      naive_gemm(g, to_double(a), to_double(b), to_double(d0), to_double(bias), to_double(pre));
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(d), ref.d, tol));
  if (g.epilogue == Epilogue::kBiasGelu) {
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(pre_t), ref.pre, tol));
  }
}

constexpr Tol kF64Tol{1e-9, 1e-9, 1e-16};
constexpr Tol kF32Tol{1e-5, 1e-5, 1e-10};

TEST(GemmCpu, AllTransposeCombinationsBatched) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      GemmArgs g{5, 7, 3};
      g.trans_a = ta;
      g.trans_b = tb;
      g.alpha = 0.7f;
      g.batch = 3;
      check_cpu(g, DType::kF64, kF64Tol);
      check_cpu(g, DType::kF32, kF32Tol);
    }
  }
}

TEST(GemmCpu, ExplicitStridesSkipPadding) {
  GemmArgs g{4, 6, 5};
  g.trans_b = true;
  g.batch = 3;
  g.stride_a = 4 * 5 + 3;
  g.stride_b = 6 * 5 + 1;
  g.stride_d = 4 * 6 + 2;
  g.beta = 1.0f;  // the padding between D matrices must stay untouched: naive keeps d0 there
  check_cpu(g, DType::kF64, kF64Tol);
}

TEST(GemmCpu, BetaOneAccumulates) {
  for (bool ta : {false, true}) {
    GemmArgs g{6, 4, 9};
    g.trans_a = ta;
    g.beta = 1.0f;
    g.alpha = 1.5f;
    check_cpu(g, DType::kF64, kF64Tol);
    check_cpu(g, DType::kF32, kF32Tol);
  }
}

TEST(GemmCpu, BetaOneTwiceIsTwiceTheProduct) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  GemmArgs g{3, 5, 4};
  g.beta = 1.0f;
  const std::vector<float> a = testing::random_uniform(12, 1), b = testing::random_uniform(20, 2);
  const std::vector<float> d0 = testing::random_uniform(15, 3);
  TensorView d = pool.from(d0, DType::kF64, {3, 5});
  TensorView ta = pool.from(a, DType::kF64, {3, 4}), tb = pool.from(b, DType::kF64, {4, 5});
  gemm(g, d, ta, tb, {}, {}, stream);
  gemm(g, d, ta, tb, {}, {}, stream);
  GemmArgs once = g;
  once.alpha = 2.0f;
  const NaiveResult ref = naive_gemm(once, to_double(a), to_double(b), to_double(d0), {}, {});
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(d), ref.d, kF64Tol));
}

TEST(GemmCpu, Epilogues) {
  for (Epilogue e : {Epilogue::kBias, Epilogue::kBiasGelu, Epilogue::kDGelu}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "epilogue=" << static_cast<int>(e) << " tb=" << tb);
      GemmArgs g{7, 5, 6};
      g.trans_b = tb;
      g.alpha = 0.9f;
      g.epilogue = e;
      // f64 against the naive loop; kDGelu's reference derivative is a central difference of
      // gelu_tanh (h = 1e-5, error ~1e-10), so the analytic gelu' is checked too.
      check_cpu(g, DType::kF64, Tol{1e-8, 1e-8, 1e-14});
      check_cpu(g, DType::kF32, kF32Tol);
      g.beta = 1.0f;  // acc includes beta * D before the epilogue
      check_cpu(g, DType::kF64, Tol{1e-8, 1e-8, 1e-14});
    }
  }
}

TEST(GemmCpu, BiasBackwardAccumulates) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const int64_t rows = 9, n = 7;
  const std::vector<float> dy = testing::random_uniform(rows * n, 5);
  const std::vector<float> db0 = testing::random_uniform(n, 6);
  std::vector<double> sum(n, 0.0);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < n; ++c) sum[c] += dy[r * n + c];
  for (DType t : {DType::kF64, DType::kF32}) {
    TensorView dbias = pool.from(db0, t, {n});
    TensorView tdy = pool.from(dy, t, {rows, n});
    bias_backward(dbias, tdy, stream);
    std::vector<double> once(n), twice(n);
    for (int64_t c = 0; c < n; ++c) {
      once[c] = db0[c] + sum[c];
      twice[c] = db0[c] + 2 * sum[c];
    }
    const Tol tol = t == DType::kF64 ? kF64Tol : kF32Tol;
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dbias), once, tol));
    bias_backward(dbias, tdy, stream);
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dbias), twice, tol));
  }
}

// gemm_bias_grad = the plain GEMM (trans_a, beta = 1) plus dbias += column sums of A [k, m],
// against the naive loop and direct sums in double; twice accumulates twice.
TEST(GemmCpu, BiasGradIsGemmPlusColumnSums) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  GemmArgs g{5, 4, 9};  // dW [out 5, in 4] += dy^T [5, rows 9] x [9, 4]
  g.trans_a = true;
  g.beta = 1.0f;
  const std::vector<float> a = testing::random_uniform(g.k * g.m, 41);
  const std::vector<float> b = testing::random_uniform(g.k * g.n, 42);
  const std::vector<float> d0 = testing::random_uniform(g.m * g.n, 43);
  const std::vector<float> db0 = testing::random_uniform(g.m, 44);
  std::vector<double> sums(static_cast<size_t>(g.m), 0.0);
  for (int64_t r = 0; r < g.k; ++r)
    for (int64_t c = 0; c < g.m; ++c) sums[c] += a[r * g.m + c];
  for (DType t : {DType::kF64, DType::kF32}) {
    SCOPED_TRACE(engine::dtype_name(t));
    TensorView d = pool.from(d0, t, {g.m, g.n});
    TensorView dbias = pool.from(db0, t, {g.m});
    TensorView ta = pool.from(a, t, {g.k, g.m}), tb = pool.from(b, t, {g.k, g.n});
    gemm_bias_grad(g, d, dbias, ta, tb, stream);
    const NaiveResult ref = naive_gemm(g, to_double(a), to_double(b), to_double(d0), {}, {});
    const Tol tol = t == DType::kF64 ? kF64Tol : kF32Tol;
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(d), ref.d, tol));
    std::vector<double> once(sums.size()), twice(sums.size());
    for (size_t c = 0; c < sums.size(); ++c) {
      once[c] = db0[c] + sums[c];
      twice[c] = db0[c] + 2 * sums[c];
    }
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dbias), once, tol));
    gemm_bias_grad(g, d, dbias, ta, tb, stream);
    EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(dbias), twice, tol));
  }
}

// ---- cuBLASLt plan cache key (host code) --------------------------------------------------------

const void* addr(uintptr_t a) { return reinterpret_cast<const void*>(a); }

TEST(GemmPlanKey, AlignmentClass) {
  using detail::gemm_alignment_bytes;
  EXPECT_EQ(gemm_alignment_bytes(addr(0x10000), 0, 2, 1), 256u);
  EXPECT_EQ(gemm_alignment_bytes(addr(0x10010), 0, 2, 1), 16u);
  EXPECT_EQ(gemm_alignment_bytes(addr(0x10002), 0, 2, 1), 2u);
  EXPECT_EQ(gemm_alignment_bytes(nullptr, 0, 2, 1), 256u);  // no operand: no constraint
  // Batches: every matrix's address counts, so the stride in bytes does too.
  EXPECT_EQ(gemm_alignment_bytes(addr(0x10000), 3, 2, 1), 256u);
  EXPECT_EQ(gemm_alignment_bytes(addr(0x10000), 3, 2, 2), 2u);
  EXPECT_EQ(gemm_alignment_bytes(addr(0x10000), 24, 4, 2), 32u);
}

// A GPT-2 linear layer's forward with bias; pointers 256-byte aligned.
detail::GemmPlanKey linear_key(GemmArgs g, uintptr_t a = 0x100000, uintptr_t b = 0x200000,
                               uintptr_t d = 0x300000, uintptr_t bias = 0x400000,
                               DType d_dtype = DType::kBF16, uint64_t ws = 32u << 20,
                               int device = 0) {
  return detail::gemm_plan_key(g, g.epilogue, DType::kBF16, d_dtype, addr(a), addr(b), addr(d),
                               g.epilogue == Epilogue::kNone ? nullptr : addr(bias),
                               g.epilogue == Epilogue::kBiasGelu ? addr(0x500000) : nullptr, ws,
                               device);
}

TEST(GemmPlanKey, EqualForTheSameConfigurationAtOtherAddresses) {
  GemmArgs g{4096, 3072, 768};
  g.trans_b = true;
  g.epilogue = Epilogue::kBias;
  const detail::GemmPlanKey k = linear_key(g);
  const detail::GemmPlanKeyHash hash;
  // Other buffers of the same alignment class, another alpha, another non-zero beta: same plan.
  const detail::GemmPlanKey moved = linear_key(g, 0x900000, 0xa00100, 0xb00200, 0xc00300);
  EXPECT_EQ(k, moved);
  EXPECT_EQ(hash(k), hash(moved));
  GemmArgs scaled = g;
  scaled.alpha = 0.5f;
  EXPECT_EQ(k, linear_key(scaled));
  GemmArgs b1 = g, b2 = g;
  b1.beta = 1.0f;
  b2.beta = 2.0f;
  EXPECT_EQ(linear_key(b1), linear_key(b2));
  // Packed strides written out explicitly describe the same layouts.
  GemmArgs explicit_strides = g;
  explicit_strides.stride_a = g.m * g.k;
  explicit_strides.stride_b = g.k * g.n;
  explicit_strides.stride_d = g.m * g.n;
  EXPECT_EQ(k, linear_key(explicit_strides));
}

TEST(GemmPlanKey, DiffersInEveryField) {
  GemmArgs g{4096, 3072, 768};
  g.trans_b = true;
  g.epilogue = Epilogue::kBias;
  const detail::GemmPlanKey k = linear_key(g);
  std::vector<detail::GemmPlanKey> others;
  auto with = [&](auto change) {
    GemmArgs c = g;
    change(c);
    others.push_back(linear_key(c));
  };
  with([](GemmArgs& c) { c.m = 4095; });
  with([](GemmArgs& c) { c.n = 3080; });
  with([](GemmArgs& c) { c.k = 1024; });
  with([](GemmArgs& c) { c.trans_a = true; });
  with([](GemmArgs& c) { c.trans_b = false; });
  with([](GemmArgs& c) { c.beta = 1.0f; });
  with([](GemmArgs& c) { c.epilogue = Epilogue::kBiasGelu; });
  with([](GemmArgs& c) { c.epilogue = Epilogue::kNone; });
  others.push_back(linear_key(g, 0x100002));                                // A 2-byte aligned
  others.push_back(linear_key(g, 0x100000, 0x200010));                      // B 16-byte aligned
  others.push_back(linear_key(g, 0x100000, 0x200000, 0x300008));            // D 8-byte aligned
  others.push_back(linear_key(g, 0x100000, 0x200000, 0x300000, 0x400004));  // bias
  others.push_back(linear_key(g, 0x100000, 0x200000, 0x300000, 0x400000, DType::kF32));
  others.push_back(linear_key(g, 0x100000, 0x200000, 0x300000, 0x400000, DType::kBF16, 0));
  others.push_back(
      linear_key(g, 0x100000, 0x200000, 0x300000, 0x400000, DType::kBF16, 32u << 20, 1));
  for (size_t i = 0; i < others.size(); ++i) {
    SCOPED_TRACE(::testing::Message() << "variant " << i);
    EXPECT_NE(others[i], k);
  }
  GemmArgs batched{64, 64, 32};
  batched.batch = 8;
  GemmArgs strided = batched, fewer = batched;
  strided.stride_d = 64 * 64 + 64;
  fewer.batch = 7;
  EXPECT_NE(linear_key(strided), linear_key(batched));
  EXPECT_NE(linear_key(fewer), linear_key(batched));
  // GELU epilogues see the aux pointer's alignment too.
  GemmArgs gelu = g;
  gelu.epilogue = Epilogue::kBiasGelu;
  const detail::GemmPlanKey with_aux = linear_key(gelu);
  detail::GemmPlanKey misaligned_aux = detail::gemm_plan_key(
      gelu, gelu.epilogue, DType::kBF16, DType::kBF16, addr(0x100000), addr(0x200000),
      addr(0x300000), addr(0x400000), addr(0x500002), 32u << 20, 0);
  EXPECT_NE(with_aux, misaligned_aux);
}

// ---- GPU vs CPU twin ----------------------------------------------------------------------------

// Tolerances. bf16 D: the GPU rounds each output to bf16 (relative 2^-9) and sums in another
// order than OpenBLAS; |D| reaches ~20 at k = 3072, so atol 2e-2 + rtol 1e-2. f32 D from bf16
// inputs: products are exact in f32, only the summation order differs. f32 everywhere: cuBLASLt
// with CUBLAS_COMPUTE_32F is full fp32 (no TF32).
constexpr Tol kBf16OutTol{2e-2, 1e-2, 1e-4};
constexpr Tol kF32OutFromBf16Tol{2e-3, 1e-4, 1e-8};
constexpr Tol kF32Tol32{1e-3, 1e-4, 1e-9};

// A 1-D view of `v` without its first `offset` elements (offset > 0 misaligns it).
TensorView skip_front(TensorView v, int64_t offset) {
  v.data = static_cast<char*>(v.data) + offset * engine::dtype_size(v.dtype);
  v.shape[0] -= offset;
  return v;
}

// Runs `g` on the GPU (act A/B, d_dtype D) and on the CPU twin in f32 with the same (rounded)
// inputs; compares D, and pre_gelu for kBiasGelu. misalign > 0: the GPU's A, B, D and bias start
// that many elements into their buffers (cuBLASLt must then pick a kernel for unaligned data).
void check_gpu(const GemmArgs& g, DType act, DType d_dtype, Tol tol, int64_t misalign = 0) {
  TestStream gpu(Device::kCuda);
  TestStream cpu(Device::kCpu);
  TensorPool gpool(Device::kCuda);
  TensorPool cpool(Device::kCpu);
  const int64_t na = total_elems(g.batch, g.stride_a, a_elems(g));
  const int64_t nb = total_elems(g.batch, g.stride_b, b_elems(g));
  const int64_t nd = total_elems(g.batch, g.stride_d, g.m * g.n);
  auto rounded = [&](std::vector<float> v, DType t) {
    return t == DType::kBF16 ? testing::round_bf16(std::move(v)) : v;
  };
  const std::vector<float> a = rounded(testing::random_uniform(na, 21), act);
  const std::vector<float> b = rounded(testing::random_uniform(nb, 22), act);
  const std::vector<float> d0 = rounded(testing::random_uniform(nd, 23), d_dtype);
  const std::vector<float> bias = rounded(testing::random_uniform(g.n, 24), act);
  const std::vector<float> pre = rounded(testing::random_uniform(g.m * g.n, 25, -3, 3), act);
  const bool has_bias = g.epilogue == Epilogue::kBias || g.epilogue == Epilogue::kBiasGelu;
  const bool has_pre = g.epilogue == Epilogue::kBiasGelu || g.epilogue == Epilogue::kDGelu;

  struct Run {
    TensorView d, pre;
  };
  auto run = [&](TensorPool& pool, Stream& s, DType ta, DType td, int64_t off) {
    // values behind `off` elements of padding, seen from the first value on.
    auto placed = [&](const std::vector<float>& values, DType t) {
      std::vector<float> padded(static_cast<size_t>(off), 0.0f);
      padded.insert(padded.end(), values.begin(), values.end());
      return skip_front(pool.from(padded, t, {static_cast<int64_t>(padded.size())}), off);
    };
    Run r;
    r.d = g.beta != 0.0f ? placed(d0, td) : skip_front(pool.empty(td, {nd + off}), off);
    r.pre = g.epilogue == Epilogue::kDGelu ? pool.from(pre, ta, {g.m, g.n})
            : has_pre                      ? pool.empty(ta, {g.m, g.n})
                                           : TensorView{};
    gemm(g, r.d, placed(a, ta), placed(b, ta),
         has_bias ? ConstTensorView(placed(bias, ta)) : ConstTensorView{}, r.pre, s);
    return r;
  };
  const Run got = run(gpool, gpu, act, d_dtype, misalign);
  const Run ref = run(cpool, cpu, DType::kF32, DType::kF32, 0);
  gpu.get().synchronize();
  EXPECT_TRUE(testing::tensors_near(testing::to_host(got.d), testing::to_host(ref.d), tol));
  if (g.epilogue == Epilogue::kBiasGelu) {
    // pre_gelu is stored in the act dtype.
    EXPECT_TRUE(testing::tensors_near(testing::to_host(got.pre), testing::to_host(ref.pre),
                                      act == DType::kBF16 ? kBf16OutTol : kF32Tol32));
  }
}

TEST(GemmGpu, Bf16AllTransposes) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "trans_a=" << ta << " trans_b=" << tb);
      GemmArgs g{64, 48, 40};
      g.trans_a = ta;
      g.trans_b = tb;
      g.alpha = 0.5f;
      check_gpu(g, DType::kBF16, DType::kBF16, kBf16OutTol);
      check_gpu(g, DType::kF32, DType::kF32, kF32Tol32);
    }
  }
}

TEST(GemmGpu, AwkwardShapes) {
  ANVIL_SKIP_WITHOUT_GPU();
  // m, n, k not multiples of 8 (odd leading dimensions), a single row, a single column.
  const int64_t shapes[][3] = {{37, 19, 23}, {1, 33, 7}, {13, 1, 5}, {3, 5, 1}, {129, 65, 31}};
  for (const auto& s : shapes) {
    for (bool tb : {false, true}) {
      SCOPED_TRACE(::testing::Message()
                   << "m=" << s[0] << " n=" << s[1] << " k=" << s[2] << " tb=" << tb);
      GemmArgs g{s[0], s[1], s[2]};
      g.trans_b = tb;
      check_gpu(g, DType::kBF16, DType::kBF16, kBf16OutTol);
      check_gpu(g, DType::kBF16, DType::kF32, kF32OutFromBf16Tol);
      check_gpu(g, DType::kF32, DType::kF32, kF32Tol32);
    }
  }
}

TEST(GemmGpu, Bf16InF32OutAccumulates) {
  ANVIL_SKIP_WITHOUT_GPU();
  // Weight gradient of a linear layer: dW[out, in] += dy^T x (trans_a, k = tokens), f32 D.
  GemmArgs g{768, 3072, 256};
  g.trans_a = true;
  g.beta = 1.0f;
  check_gpu(g, DType::kBF16, DType::kF32, kF32OutFromBf16Tol);
  GemmArgs odd{37, 21, 19};
  odd.trans_a = true;
  odd.beta = 1.0f;
  check_gpu(odd, DType::kBF16, DType::kF32, kF32OutFromBf16Tol);
  odd.trans_a = false;
  odd.beta = 1.0f;
  check_gpu(odd, DType::kBF16, DType::kBF16, kBf16OutTol);
  check_gpu(odd, DType::kF32, DType::kF32, kF32Tol32);
}

TEST(GemmGpu, LinearLayerSizes) {
  ANVIL_SKIP_WITHOUT_GPU();
  // GPT-2 small MLP: fc (768 -> 3072, bias + GELU), proj (3072 -> 768, bias), and the input
  // gradient of fc through GELU: dx_pre = (dy W) * gelu'(pre).
  GemmArgs fc{256, 3072, 768};
  fc.trans_b = true;
  fc.epilogue = Epilogue::kBiasGelu;
  check_gpu(fc, DType::kBF16, DType::kBF16, kBf16OutTol);
  GemmArgs proj{256, 768, 3072};
  proj.trans_b = true;
  proj.epilogue = Epilogue::kBias;
  check_gpu(proj, DType::kBF16, DType::kBF16, kBf16OutTol);
  GemmArgs dproj{256, 3072, 768};  // dpre = (dy W_proj) * gelu'(pre), W_proj [768, 3072]
  dproj.epilogue = Epilogue::kDGelu;
  check_gpu(dproj, DType::kBF16, DType::kBF16, kBf16OutTol);
}

TEST(GemmGpu, EpiloguesFusedAndFallback) {
  ANVIL_SKIP_WITHOUT_GPU();
  // n = 64 takes the fused cuBLASLt epilogues; n = 36 and n = 21 (aux ld not a multiple of 8)
  // and beta = 1 take the plain GEMM + elementwise kernel. f32 D with bf16 A/B has mixed
  // bias/aux dtypes, fused only if cuBLASLt offers it.
  for (Epilogue e : {Epilogue::kBias, Epilogue::kBiasGelu, Epilogue::kDGelu}) {
    for (int64_t n : {64, 36, 21}) {
      for (float beta : {0.0f, 1.0f}) {
        SCOPED_TRACE(::testing::Message()
                     << "epilogue=" << static_cast<int>(e) << " n=" << n << " beta=" << beta);
        GemmArgs g{40, n, 24};
        g.trans_b = true;
        g.epilogue = e;
        g.beta = beta;
        // cuBLASLt's fused GELU may use a hardware tanh approximation (~2^-11 relative), so
        // f32 outputs through GELU get 3e-3 instead of the pure-GEMM f32 tolerances.
        const bool gelu = e != Epilogue::kBias;
        const Tol gelu_f32{3e-3, 3e-3, 1e-6};
        check_gpu(g, DType::kBF16, DType::kBF16, kBf16OutTol);
        check_gpu(g, DType::kF32, DType::kF32, gelu ? gelu_f32 : kF32Tol32);
        check_gpu(g, DType::kBF16, DType::kF32, gelu ? gelu_f32 : kF32OutFromBf16Tol);
      }
    }
  }
}

TEST(GemmGpu, StridedBatch) {
  ANVIL_SKIP_WITHOUT_GPU();
  // Attention-like products: S = q k^T over B*H heads, then P v; odd T; padded strides too.
  GemmArgs qk{33, 33, 16};
  qk.trans_b = true;
  qk.batch = 6;
  qk.alpha = 0.25f;
  check_gpu(qk, DType::kBF16, DType::kF32, kF32OutFromBf16Tol);
  check_gpu(qk, DType::kBF16, DType::kBF16, kBf16OutTol);
  check_gpu(qk, DType::kF32, DType::kF32, kF32Tol32);
  GemmArgs pv{33, 16, 33};
  pv.batch = 6;
  pv.trans_a = true;
  check_gpu(pv, DType::kBF16, DType::kBF16, kBf16OutTol);
  GemmArgs padded{8, 16, 24};
  padded.batch = 4;
  padded.stride_a = 8 * 24 + 8;
  padded.stride_b = 24 * 16 + 16;
  padded.stride_d = 8 * 16 + 8;
  padded.beta = 1.0f;
  check_gpu(padded, DType::kBF16, DType::kBF16, kBf16OutTol);
  check_gpu(padded, DType::kF32, DType::kF32, kF32Tol32);
}

TEST(GemmGpu, PlanCacheRepeatedAndInterleavedShapes) {
  ANVIL_SKIP_WITHOUT_GPU();
  // Shapes no other test uses, so each adds a new plan to this thread's cache.
  GemmArgs fwd{72, 136, 40};  // linear forward with the bias epilogue
  fwd.trans_b = true;
  fwd.epilogue = Epilogue::kBias;
  GemmArgs wgrad{136, 40, 72};  // weight gradient: f32 D, beta = 1
  wgrad.trans_a = true;
  wgrad.beta = 1.0f;
  GemmArgs fc{72, 56, 40};  // bias + GELU, saving pre_gelu
  fc.trans_b = true;
  fc.epilogue = Epilogue::kBiasGelu;
  auto run_all = [&] {
    check_gpu(fwd, DType::kBF16, DType::kBF16, kBf16OutTol);
    check_gpu(wgrad, DType::kBF16, DType::kF32, kF32OutFromBf16Tol);
    check_gpu(fc, DType::kBF16, DType::kBF16, kBf16OutTol);
  };
  const size_t before = detail::gemm_plan_cache_size();
  run_all();
  // Three new keys (four or more if a fused epilogue falls back: the plain GEMM's plan too).
  const size_t after_first = detail::gemm_plan_cache_size();
  EXPECT_GE(after_first, before + 3);
  // Interleaved repeats reuse the plans (other buffers, same alignment class) and still match.
  run_all();
  check_gpu(fwd, DType::kBF16, DType::kBF16, kBf16OutTol);
  run_all();
  EXPECT_EQ(detail::gemm_plan_cache_size(), after_first);
  // Operands one element off their 256-byte alignment are another key: a plan whose algorithm
  // accepts 2-byte (bf16) / 4-byte (f32) aligned data, never the aligned plan's.
  check_gpu(wgrad, DType::kBF16, DType::kF32, kF32OutFromBf16Tol, 1);
  EXPECT_EQ(detail::gemm_plan_cache_size(), after_first + 1);
  // Fused, or the fallback if cuBLASLt has no bias epilogue for unaligned data (one more plan).
  check_gpu(fwd, DType::kBF16, DType::kBF16, kBf16OutTol, 1);
  const size_t with_misaligned = detail::gemm_plan_cache_size();
  run_all();
  check_gpu(fwd, DType::kBF16, DType::kBF16, kBf16OutTol, 1);
  check_gpu(wgrad, DType::kBF16, DType::kF32, kF32OutFromBf16Tol, 1);
  EXPECT_EQ(detail::gemm_plan_cache_size(), with_misaligned);
}

TEST(GemmGpu, BiasBackwardMatchesCpuAndAccumulates) {
  ANVIL_SKIP_WITHOUT_GPU();
  TestStream gpu(Device::kCuda);
  TestStream cpu(Device::kCpu);
  TensorPool gpool(Device::kCuda);
  TensorPool cpool(Device::kCpu);
  const int64_t shapes[][2] = {{1000, 771}, {1, 5}, {4096, 768}, {3, 50257}};
  for (const auto& s : shapes) {
    const int64_t rows = s[0], n = s[1];
    for (DType t : {DType::kBF16, DType::kF32}) {
      SCOPED_TRACE(::testing::Message()
                   << "rows=" << rows << " n=" << n << " dtype=" << engine::dtype_name(t));
      std::vector<float> dy = testing::random_uniform(rows * n, 31);
      if (t == DType::kBF16) dy = testing::round_bf16(dy);
      const std::vector<float> db0 = testing::random_uniform(n, 32);
      TensorView gdb = gpool.from(db0, DType::kF32, {n});
      TensorView gdy = gpool.from(dy, t, {rows, n});
      TensorView cdb = cpool.from(db0, DType::kF32, {n});
      TensorView cdy = cpool.from(dy, DType::kF32, {rows, n});
      bias_backward(gdb, gdy, gpu);
      bias_backward(gdb, gdy, gpu);  // += twice
      bias_backward(cdb, cdy, cpu);
      bias_backward(cdb, cdy, cpu);
      gpu.get().synchronize();
      // f32 sums of up to 4096 terms in another order: 1e-4 relative to sqrt(rows).
      const std::vector<float> got = testing::to_host(gdb);
      EXPECT_TRUE(testing::tensors_near(got, testing::to_host(cdb), Tol{1e-3, 1e-4, 1e-9}));
      // Deterministic: the same run again is bitwise equal.
      TensorView gdb2 = gpool.from(db0, DType::kF32, {n});
      bias_backward(gdb2, gdy, gpu);
      bias_backward(gdb2, gdy, gpu);
      gpu.get().synchronize();
      EXPECT_EQ(got, testing::to_host(gdb2));
    }
  }
}

// The weight gradients of GPT-2 124M's linears with their bias gradients fused (cuBLASLt
// BGRADB), and an odd shape (fallback allowed), against the CPU twin; twice accumulates; the
// same run again is bitwise equal. The GPT-sized shapes must take the fused path.
TEST(GemmGpu, BiasGradMatchesCpuAndFuses) {
  ANVIL_SKIP_WITHOUT_GPU();
  const int64_t shapes[][3] = {
      {2304, 768, 2048}, {3072, 768, 1024}, {768, 3072, 1024}, {37, 21, 19}};
  for (const auto& sh : shapes) {
    GemmArgs g{sh[0], sh[1], sh[2]};
    g.trans_a = true;
    g.beta = 1.0f;
    SCOPED_TRACE(::testing::Message() << "m=" << g.m << " n=" << g.n << " k=" << g.k);
    const std::vector<float> a = testing::round_bf16(testing::random_uniform(g.k * g.m, 51));
    const std::vector<float> b = testing::round_bf16(testing::random_uniform(g.k * g.n, 52));
    const std::vector<float> d0 = testing::random_uniform(g.m * g.n, 53);
    const std::vector<float> db0 = testing::random_uniform(g.m, 54);
    auto run = [&](Device dev, DType act) {
      TestStream s(dev);
      TensorPool pool(dev);
      TensorView d = pool.from(d0, DType::kF32, {g.m, g.n});
      TensorView db = pool.from(db0, DType::kF32, {g.m});
      TensorView ta = pool.from(a, act, {g.k, g.m}), tb = pool.from(b, act, {g.k, g.n});
      gemm_bias_grad(g, d, db, ta, tb, s);
      gemm_bias_grad(g, d, db, ta, tb, s);
      s.get().synchronize();
      return std::make_pair(testing::to_host(d), testing::to_host(db));
    };
    const size_t fused_before = detail::gemm_bias_grad_fused_calls();
    const auto got = run(Device::kCuda, DType::kBF16);
    const size_t fused = detail::gemm_bias_grad_fused_calls() - fused_before;
    const auto ref = run(Device::kCpu, DType::kF32);
    EXPECT_TRUE(testing::tensors_near(got.first, ref.first, kF32OutFromBf16Tol)) << "dW";
    EXPECT_TRUE(testing::tensors_near(got.second, ref.second, Tol{1e-3, 1e-4, 1e-9})) << "dbias";
    EXPECT_EQ(run(Device::kCuda, DType::kBF16), got) << "must be bitwise reproducible";
    if (g.m % 8 == 0) {
      EXPECT_EQ(fused, 2u) << "cuBLASLt BGRADB not taken";
    }
    std::printf("gemm_bias_grad m=%lld n=%lld k=%lld: %zu of 2 calls fused\n",
                static_cast<long long>(g.m), static_cast<long long>(g.n),
                static_cast<long long>(g.k), fused);
  }
}

}  // namespace
}  // namespace anvil::ops
