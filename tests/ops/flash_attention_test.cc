// Tests of the flash attention op (ops/flash_attention.h).
// CPU twin: against the unfused reference op (ops/attention.h, itself checked against finite
// differences) for GPT's causal case with documents, dropout and a TP head offset, forward and
// backward; against central differences in f64 for every other feature (bidirectional, key
// padding, ALiBi, relative buckets with the table gradient, cross-attention with Tq != Tk,
// no scaling, dropout); empty rows (all keys padded) give out 0, lse +inf and zero gradients.
// GPU: the bf16 kernels against the CPU twin (f32 on the same bf16-rounded inputs) on random
// data with poisoned outputs, for head dims 64 and 128, lengths that are not tile multiples
// (1, 17, 1000, 2049), every mask kind, dropout on and off; backward is bitwise reproducible.
#include "ops/flash_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "ops/attention.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using engine::slice_cols;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;

// One test problem: shapes, options and masks as host data.
struct Case {
  int64_t batch = 2, tq = 9, tk = 9, heads = 2, dh = 4;
  bool causal = true, cross = false;  // cross: q and kv in separate buffers
  AttentionBias bias = AttentionBias::kNone;
  float scale = 0.5f, dropout = 0.0f;
  int64_t total_heads = 0, head_offset = 0;
  std::vector<int32_t> segs_q, segs_k, kv_lengths, rel_buckets;
  std::vector<float> rel_table;  // [buckets, total heads]
};

FlashAttentionArgs args_of(const Case& c) {
  FlashAttentionArgs a;
  a.batch = c.batch;
  a.q_len = c.tq;
  a.kv_len = c.tk;
  a.heads = c.heads;
  a.head_dim = c.dh;
  a.causal = c.causal;
  a.scale = c.scale;
  a.bias = c.bias;
  a.dropout_p = c.dropout;
  a.seed = 99;
  a.offset = 5;
  a.total_heads = c.total_heads;
  a.head_offset = c.head_offset;
  return a;
}

int64_t model_heads(const Case& c) { return c.total_heads == 0 ? c.heads : c.total_heads; }

// Relative buckets like T5's (bidirectional, 8 buckets, exact up to 2, log-spaced to 16).
void add_relative_buckets(Case* c, uint64_t seed) {
  c->bias = AttentionBias::kRelativeBuckets;
  const int nb = 8;
  for (int64_t r = -(c->tq - 1); r <= c->tk - 1; ++r) {
    const int64_t n = std::abs(r);
    int bucket = n < 2 ? static_cast<int>(n)
                       : std::min(3, 2 + static_cast<int>(std::log(n / 2.0) / std::log(8.0) * 2));
    c->rel_buckets.push_back(bucket + (r > 0 ? nb / 2 : 0));
  }
  c->rel_table = testing::random_uniform(nb * model_heads(*c), seed, -1.0f, 1.0f);
}

// The views of one problem in a pool: q/k/v either column views of a fused qkv (self) or of a
// q buffer and a kv buffer (cross), like the models lay them out.
struct Views {
  TensorView q, k, v, out, lse, dq, dk, dv, dout, d_table;
  TensorView dq_buf, dkv_buf;  // the whole buffers holding dq and dk|dv (the same when fused)
  AttentionMasks masks;
};

Views make_views(TensorPool& pool, const Case& c, DType dt, const std::vector<float>& xq,
                 const std::vector<float>& xkv, const std::vector<float>& xdout) {
  Views w;
  const int64_t hd = c.heads * c.dh;
  if (!c.cross) {
    TensorView qkv = pool.from(xq, dt, {c.batch * c.tq, 3 * hd});
    TensorView dqkv = pool.empty(dt, {c.batch * c.tq, 3 * hd});
    w.q = slice_cols(qkv, 0, hd);
    w.k = slice_cols(qkv, hd, 2 * hd);
    w.v = slice_cols(qkv, 2 * hd, 3 * hd);
    w.dq = slice_cols(dqkv, 0, hd);
    w.dk = slice_cols(dqkv, hd, 2 * hd);
    w.dv = slice_cols(dqkv, 2 * hd, 3 * hd);
    w.dq_buf = w.dkv_buf = dqkv;
  } else {
    w.q = pool.from(xq, dt, {c.batch * c.tq, hd});
    TensorView kv = pool.from(xkv, dt, {c.batch * c.tk, 2 * hd});
    TensorView dkv = pool.empty(dt, {c.batch * c.tk, 2 * hd});
    w.k = slice_cols(kv, 0, hd);
    w.v = slice_cols(kv, hd, 2 * hd);
    w.dq = pool.empty(dt, {c.batch * c.tq, hd});
    w.dk = slice_cols(dkv, 0, hd);
    w.dv = slice_cols(dkv, hd, 2 * hd);
    w.dq_buf = w.dq;
    w.dkv_buf = dkv;
  }
  w.out = pool.empty(dt, {c.batch * c.tq, hd});
  w.lse = pool.empty(DType::kF32, {c.batch, c.heads, c.tq});
  w.dout = pool.from(xdout, dt, {c.batch * c.tq, hd});
  if (!c.segs_q.empty()) {
    w.masks.seg_q = pool.from_i32(c.segs_q, {c.batch * c.tq});
    w.masks.seg_k = pool.from_i32(c.segs_k, {c.batch * c.tk});
  }
  if (!c.kv_lengths.empty()) w.masks.kv_lengths = pool.from_i32(c.kv_lengths, {c.batch});
  if (c.bias == AttentionBias::kRelativeBuckets) {
    const int64_t nb = static_cast<int64_t>(c.rel_table.size()) / model_heads(c);
    w.masks.rel_buckets =
        pool.from_i32(c.rel_buckets, {static_cast<int64_t>(c.rel_buckets.size())});
    w.masks.rel_table = pool.from(c.rel_table, DType::kF32, {nb, model_heads(c)});
    w.d_table =
        pool.from(std::vector<float>(c.rel_table.size(), 0.25f), DType::kF32, {nb, model_heads(c)});
  }
  return w;
}

struct Inputs {
  std::vector<float> xq, xkv, dout;
};

Inputs random_inputs(const Case& c, uint64_t seed, float range = 1.5f) {
  const int64_t hd = c.heads * c.dh;
  Inputs in;
  in.xq = testing::random_uniform(c.batch * c.tq * (c.cross ? hd : 3 * hd), seed, -range, range);
  if (c.cross) in.xkv = testing::random_uniform(c.batch * c.tk * 2 * hd, seed + 1, -range, range);
  in.dout = testing::random_uniform(c.batch * c.tq * hd, seed + 2);
  return in;
}

struct Results {
  std::vector<double> out, lse, dq, dk, dv, d_table;
};

// The [rows, cols] column block `part` of a row-major host copy of `buf` (ld columns).
std::vector<double> columns(const std::vector<double>& host, int64_t ld, const TensorView& part,
                            const TensorView& buf) {
  const int64_t col0 = (static_cast<const char*>(part.data) - static_cast<const char*>(buf.data)) /
                       static_cast<int64_t>(engine::dtype_size(buf.dtype));
  std::vector<double> out;
  for (int64_t r = 0; r < part.dim(0); ++r) {
    for (int64_t c = 0; c < part.dim(1); ++c) out.push_back(host[r * ld + col0 + c]);
  }
  return out;
}

Results run(const Case& c, Device device, DType dt, const Inputs& in, bool backward = true) {
  TestStream stream(device);
  TensorPool pool(device);
  Views w = make_views(pool, c, dt, in.xq, in.xkv, in.dout);
  const FlashAttentionArgs a = args_of(c);
  flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream);
  Results r;
  r.out = testing::to_host_f64(w.out);
  r.lse = testing::to_host_f64(w.lse);
  if (!backward) return r;
  const size_t ws_bytes =
      flash_attention_workspace_bytes(a, w.d_table.empty() ? 0 : w.d_table.dim(0));
  flash_attention_backward(a, w.dq, w.dk, w.dv, w.d_table, w.dout, w.q, w.k, w.v, w.out, w.lse,
                           w.masks, pool.workspace(ws_bytes), stream);
  r.dq = columns(testing::to_host_f64(w.dq_buf), w.dq_buf.dim(1), w.dq, w.dq_buf);
  const std::vector<double> kv = testing::to_host_f64(w.dkv_buf);
  r.dk = columns(kv, w.dkv_buf.dim(1), w.dk, w.dkv_buf);
  r.dv = columns(kv, w.dkv_buf.dim(1), w.dv, w.dkv_buf);
  if (!w.d_table.empty()) r.d_table = testing::to_host_f64(w.d_table);
  return r;
}

// ---- CPU twin ---------------------------------------------------------------------------------

TEST(FlashAttentionCpu, MatchesUnfusedCausalWithDocumentsDropoutAndHeadOffset) {
  Case c;
  c.batch = 2, c.tq = c.tk = 11, c.heads = 2, c.dh = 4, c.dropout = 0.2f;
  c.total_heads = 5, c.head_offset = 2;
  c.scale = 0.5f;
  // Documents: ids from eods at 2, 3 and 7 (ops/attention.h's construction).
  for (int64_t b = 0; b < c.batch; ++b) {
    int32_t doc = 0;
    for (int64_t t = 0; t < c.tq; ++t) {
      c.segs_q.push_back(doc);
      if (t == 2 || t == 3 || t == 7 - b) ++doc;
    }
  }
  c.segs_k = c.segs_q;
  const Inputs in = random_inputs(c, 11);
  const Results flash = run(c, Device::kCpu, DType::kF64, in);

  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  AttentionArgs u{c.batch,   c.tq, c.heads, c.dh,          c.scale,
                  c.dropout, 99,   5,       c.total_heads, c.head_offset};
  const int64_t bt = c.batch * c.tq, hd = c.heads * c.dh;
  TensorView qkv = pool.from(in.xq, DType::kF64, {bt, 3 * hd});
  TensorView out = pool.empty(DType::kF64, {bt, hd});
  TensorView probs = pool.empty(DType::kF64, {c.batch, c.heads, c.tq, c.tq});
  TensorView dqkv = pool.empty(DType::kF64, {bt, 3 * hd});
  TensorView dout = pool.from(in.dout, DType::kF64, {bt, hd});
  TensorView segs = pool.from_i32(c.segs_q, {bt});
  attention_forward(u, out, probs, qkv, segs, {}, stream);
  attention_backward(u, dqkv, dout, qkv, probs, segs, {}, stream);
  const Tol tight{1e-12, 1e-10, 1e-20};
  EXPECT_TRUE(testing::tensors_near(flash.out, testing::to_host_f64(out), tight));
  const std::vector<double> g = testing::to_host_f64(dqkv);
  std::vector<double> dq, dk, dv;
  for (int64_t r = 0; r < bt; ++r) {
    for (int64_t col = 0; col < hd; ++col) {
      dq.push_back(g[r * 3 * hd + col]);
      dk.push_back(g[r * 3 * hd + hd + col]);
      dv.push_back(g[r * 3 * hd + 2 * hd + col]);
    }
  }
  std::vector<double> fq, fk, fv;  // flash gradients of the column views, packed the same way
  for (int64_t r = 0; r < bt; ++r) {
    for (int64_t col = 0; col < hd; ++col) {
      fq.push_back(flash.dq[r * hd + col]);
      fk.push_back(flash.dk[r * hd + col]);
      fv.push_back(flash.dv[r * hd + col]);
    }
  }
  EXPECT_TRUE(testing::tensors_near(fq, dq, tight));
  EXPECT_TRUE(testing::tensors_near(fk, dk, tight));
  EXPECT_TRUE(testing::tensors_near(fv, dv, tight));
}

// The analytic gradients of L = sum(out * dout) against central differences over every stored
// input (the fused qkv, or q and kv) and the relative-bias table.
void check_fd(const Case& c0) {
  Case c = c0;
  Inputs x = random_inputs(c, 21, 1.0f);
  const Results r = run(c, Device::kCpu, DType::kF64, x);
  auto loss = [&] {
    const Results f = run(c, Device::kCpu, DType::kF64, x, /*backward=*/false);
    double l = 0;
    for (size_t i = 0; i < f.out.size(); ++i) l += f.out[i] * static_cast<double>(x.dout[i]);
    return l;
  };
  auto fd = [&](std::vector<float>* v) {  // the inputs are stored as f32: use the real step
    std::vector<double> g;
    for (size_t i = 0; i < v->size(); ++i) {
      const float x0 = (*v)[i], xp = x0 + 1e-3f, xm = x0 - 1e-3f;
      (*v)[i] = xp;
      const double lp = loss();
      (*v)[i] = xm;
      const double lm = loss();
      (*v)[i] = x0;
      g.push_back((lp - lm) / (static_cast<double>(xp) - static_cast<double>(xm)));
    }
    return g;
  };
  const int64_t hd = c.heads * c.dh;
  auto interleave = [&](int64_t rows, std::vector<const std::vector<double>*> parts) {
    std::vector<double> out;
    for (int64_t row = 0; row < rows; ++row) {
      for (const std::vector<double>* src : parts) {
        for (int64_t col = 0; col < hd; ++col) out.push_back((*src)[row * hd + col]);
      }
    }
    return out;
  };
  const Tol tol{1e-5, 1e-4, 1e-9};
  if (!c.cross) {
    EXPECT_TRUE(
        testing::tensors_near(interleave(c.batch * c.tq, {&r.dq, &r.dk, &r.dv}), fd(&x.xq), tol))
        << "d qkv";
  } else {
    EXPECT_TRUE(testing::tensors_near(r.dq, fd(&x.xq), tol)) << "d q";
    EXPECT_TRUE(testing::tensors_near(interleave(c.batch * c.tk, {&r.dk, &r.dv}), fd(&x.xkv), tol))
        << "d kv";
  }
  if (c.bias == AttentionBias::kRelativeBuckets) {
    std::vector<double> got;
    for (double v : r.d_table) got.push_back(v - 0.25);  // d_table accumulated onto 0.25
    EXPECT_TRUE(testing::tensors_near(got, fd(&c.rel_table), tol)) << "d rel_table";
  }
}

TEST(FlashAttentionCpu, BackwardMatchesFiniteDifferencesCausal) {
  Case c;
  c.batch = 2, c.tq = c.tk = 5, c.heads = 2, c.dh = 3;
  check_fd(c);
}

TEST(FlashAttentionCpu, BackwardMatchesFiniteDifferencesBidirectionalPaddedAlibi) {
  Case c;
  c.batch = 2, c.tq = c.tk = 6, c.heads = 3, c.dh = 2, c.causal = false;
  c.bias = AttentionBias::kAlibi;
  c.total_heads = 5, c.head_offset = 1;
  c.kv_lengths = {6, 4};
  check_fd(c);
}

TEST(FlashAttentionCpu, BackwardMatchesFiniteDifferencesCrossRelativeBucketsNoScale) {
  Case c;
  c.batch = 2, c.tq = 4, c.tk = 7, c.heads = 2, c.dh = 3, c.causal = false, c.cross = true;
  c.scale = 1.0f;
  c.kv_lengths = {7, 5};
  add_relative_buckets(&c, 31);
  check_fd(c);
}

TEST(FlashAttentionCpu, BackwardMatchesFiniteDifferencesWithDropout) {
  Case c;
  c.batch = 1, c.tq = c.tk = 6, c.heads = 2, c.dh = 3, c.dropout = 0.3f;
  check_fd(c);
}

TEST(FlashAttentionCpu, EmptyRowsGiveZeroOutputInfiniteLseAndZeroGradients) {
  Case c;
  c.batch = 2, c.tq = c.tk = 4, c.heads = 1, c.dh = 2, c.causal = false;
  c.kv_lengths = {0, 4};
  const Results r = run(c, Device::kCpu, DType::kF64, random_inputs(c, 41));
  for (int64_t i = 0; i < c.tq; ++i) {
    EXPECT_EQ(r.lse[i], std::numeric_limits<double>::infinity());
    EXPECT_TRUE(std::isfinite(r.lse[c.tq + i]));
    for (int64_t d = 0; d < c.dh; ++d) {
      EXPECT_EQ(r.out[i * c.dh + d], 0.0);
      EXPECT_EQ(r.dq[i * c.dh + d], 0.0);
      EXPECT_EQ(r.dk[i * c.dh + d], 0.0);
      EXPECT_EQ(r.dv[i * c.dh + d], 0.0);
    }
  }
}

TEST(FlashAttentionCpu, AlibiSlopesAreMegatrons) {
  // get_slopes(8) = 2^-1 .. 2^-8; get_slopes(12) = get_slopes(8) + get_slopes(16)[0::2][:4].
  for (int k = 0; k < 8; ++k) EXPECT_EQ(alibi_slope(k, 8), std::ldexp(1.0f, -(k + 1)));
  for (int k = 0; k < 4; ++k) {
    EXPECT_FLOAT_EQ(alibi_slope(8 + k, 12), static_cast<float>(std::pow(2.0, -0.5 * (2 * k + 1))));
  }
}

TEST(FlashAttentionCpuDeathTest, RejectsMismatchedShapes) {
  Case c;
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const Inputs in = random_inputs(c, 1);
  Views w = make_views(pool, c, DType::kF32, in.xq, in.xkv, in.dout);
  FlashAttentionArgs a = args_of(c);
  a.q_len = c.tq + 1;
  EXPECT_DEATH(flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream), "q must");
  a = args_of(c);
  w.masks.seg_k = {};
  w.masks.seg_q = pool.from_i32(std::vector<int32_t>(c.batch * c.tq, 0), {c.batch * c.tq});
  EXPECT_DEATH(flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream),
               "come together");
}

// ---- GPU against the CPU twin -----------------------------------------------------------------

// |got - ref| <= rel_atol * rms(ref) + rtol |ref| elementwise, NMSE <= nmse (rms-relative
// absolute error: bf16 rounds P and dS, so small elements carry the row's absolute error).
void expect_near_scaled(const std::vector<double>& got, const std::vector<double>& ref,
                        double rel_atol, double rtol, double nmse, const char* what,
                        bool allow_zero = false) {
  double rms = 0;
  for (double v : ref) rms += v * v;
  rms = std::sqrt(rms / std::max<size_t>(ref.size(), 1));
  EXPECT_TRUE(testing::tensors_near(got, ref, Tol{rel_atol * rms + 1e-6, rtol, nmse}, allow_zero))
      << what;
}

// Empty rows have lse = +inf on both sides; the finite ones agree to an absolute error.
void expect_lse_near(const std::vector<double>& got, const std::vector<double>& ref) {
  std::vector<double> g, r;
  for (size_t i = 0; i < ref.size(); ++i) {
    if (std::isinf(ref[i])) {
      EXPECT_EQ(got[i], ref[i]) << "lse[" << i << "] of an empty row";
    } else {
      g.push_back(got[i]);
      r.push_back(ref[i]);
    }
  }
  if (!r.empty()) {
    EXPECT_TRUE(testing::tensors_near(g, r, Tol{2e-3, 1e-3, 1e-8})) << "lse";
  }
}

// Elementwise bounds: out 2% of rms + 2%, gradients 10% of rms + 4% (a few elements per 10^5
// reach 5-8% of rms from bf16 P and dS over 1000+ keys); NMSE 2e-4 everywhere (seen: 3e-5).
void check_gpu(Case c, uint64_t seed) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << c.batch << " Tq=" << c.tq << " Tk=" << c.tk << " H=" << c.heads
               << " Dh=" << c.dh << " causal=" << c.causal << " drop=" << c.dropout);
  Inputs in = random_inputs(c, seed);
  in.xq = testing::round_bf16(in.xq);
  in.xkv = testing::round_bf16(in.xkv);
  in.dout = testing::round_bf16(in.dout);
  const Results ref = run(c, Device::kCpu, DType::kF32, in);
  const Results got = run(c, Device::kCuda, DType::kBF16, in);
  expect_near_scaled(got.out, ref.out, 2e-2, 2e-2, 2e-4, "out");
  expect_lse_near(got.lse, ref.lse);
  // With a single key, dq and dk are exactly zero (softmax of one element is constant).
  const bool single_key = c.tk == 1;
  expect_near_scaled(got.dq, ref.dq, 1e-1, 4e-2, 2e-4, "dq", single_key);
  expect_near_scaled(got.dk, ref.dk, 1e-1, 4e-2, 2e-4, "dk", single_key);
  expect_near_scaled(got.dv, ref.dv, 1e-1, 4e-2, 2e-4, "dv");
  // d rel_table sums dS over thousands of elements: relative to its rms, like the gradients
  // (it starts at 0.25, so the += is checked too). NMSE 1e-3: dvec from the bf16 output shifts
  // every dS of a row alike, and with few buckets over long rows (114 x 300) that shift adds up
  // in the far buckets (seen 4.4e-4 there, the same before and after the smem bias band).
  if (!ref.d_table.empty()) {
    expect_near_scaled(got.d_table, ref.d_table, 1e-1, 4e-2, 1e-3, "d rel_table");
  }
  const Results again = run(c, Device::kCuda, DType::kBF16, in);
  EXPECT_EQ(again.dq, got.dq) << "backward must be bitwise reproducible";
  EXPECT_EQ(again.dk, got.dk);
  EXPECT_EQ(again.dv, got.dv);
  EXPECT_EQ(again.d_table, got.d_table);
}

Case gpu_case(int64_t b, int64_t t, int64_t h, int64_t dh, bool causal) {
  Case c;
  c.batch = b, c.tq = c.tk = t, c.heads = h, c.dh = dh, c.causal = causal;
  c.scale = 1.0f / std::sqrt(static_cast<float>(dh));
  return c;
}

TEST(FlashAttentionGpu, OddLengthsBothHeadDimsCausalAndNot) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 128}) {
    for (bool causal : {true, false}) {
      for (int64_t t : {1, 17, 1000}) check_gpu(gpu_case(2, t, 2, dh, causal), 100 + t);
      check_gpu(gpu_case(1, 2049, 1, dh, causal), 7);
    }
  }
}

TEST(FlashAttentionGpu, DocumentsDropoutHeadOffset) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 128}) {
    for (float p : {0.0f, 0.1f}) {
      Case c = gpu_case(2, 300, 3, dh, true);
      c.dropout = p, c.total_heads = 8, c.head_offset = 4;
      const std::vector<int32_t> tok = testing::random_ints(c.batch * c.tq, 5, 0, 40);
      for (int64_t b = 0; b < c.batch; ++b) {
        int32_t doc = 0;
        for (int64_t t = 0; t < c.tq; ++t) {
          c.segs_q.push_back(doc);
          if (tok[b * c.tq + t] == 0) ++doc;
        }
      }
      c.segs_k = c.segs_q;
      check_gpu(c, 9);
    }
  }
}

TEST(FlashAttentionGpu, PaddingAlibiCrossAttention) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 128}) {
    Case c = gpu_case(3, 200, 2, dh, false);
    c.kv_lengths = {200, 77, 1};
    c.bias = AttentionBias::kAlibi;
    c.total_heads = 6, c.head_offset = 2;
    check_gpu(c, 12);
    Case x = gpu_case(2, 130, 2, dh, false);
    x.cross = true, x.tk = 257, x.kv_lengths = {257, 100}, x.scale = 1.0f;
    check_gpu(x, 13);
    x.causal = false, x.kv_lengths = {0, 64};  // an empty sample: out 0, lse +inf
    check_gpu(x, 14);
  }
}

TEST(FlashAttentionGpu, RelativeBucketsForward) {
  ANVIL_SKIP_WITHOUT_GPU();
  Case c = gpu_case(2, 150, 2, 64, false);
  c.cross = true, c.tk = 90, c.scale = 1.0f;
  add_relative_buckets(&c, 3);
  Inputs in = random_inputs(c, 15);
  in.xq = testing::round_bf16(in.xq);
  in.xkv = testing::round_bf16(in.xkv);
  const Results ref = run(c, Device::kCpu, DType::kF32, in, false);
  const Results got = run(c, Device::kCuda, DType::kBF16, in, false);
  expect_near_scaled(got.out, ref.out, 2e-2, 2e-2, 2e-4, "out");
  expect_lse_near(got.lse, ref.lse);
}

// T5's encoder (bidirectional, padded keys), decoder self-attention (causal, dropout) and a
// cross-shaped case, with heads split as under TP: d rel_table against the CPU twin.
TEST(FlashAttentionGpu, RelativeBucketsBackward) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 128}) {
    Case enc = gpu_case(3, 200, 2, dh, false);
    enc.scale = 1.0f, enc.kv_lengths = {200, 130, 7}, enc.total_heads = 6, enc.head_offset = 2;
    add_relative_buckets(&enc, 21);
    check_gpu(enc, 22);
    Case dec = gpu_case(2, 257, 3, dh, true);
    dec.scale = 1.0f, dec.dropout = 0.1f;
    add_relative_buckets(&dec, 23);
    check_gpu(dec, 24);
    Case x = gpu_case(2, 150, 2, dh, false);
    x.cross = true, x.tk = 90, x.scale = 1.0f;
    add_relative_buckets(&x, 25);
    check_gpu(x, 26);
    // Fewer queries than keys (T5 decoder x encoder lengths, several key tiles per dq block,
    // a band longer than Tq + 64 in the forward and dq kernels), padded keys.
    Case y = gpu_case(2, 114, 2, dh, false);
    y.cross = true, y.tk = 300, y.scale = 1.0f, y.kv_lengths = {300, 131};
    add_relative_buckets(&y, 27);
    check_gpu(y, 28);
    // Whole tiles only (T5's encoder length), heads offset as under TP.
    Case t = gpu_case(1, 512, 2, dh, false);
    t.scale = 1.0f, t.total_heads = 4, t.head_offset = 1;
    add_relative_buckets(&t, 29);
    check_gpu(t, 30);
  }
}

}  // namespace
}  // namespace anvil::ops
