// Tests of causal multi-head self-attention (ops/attention.h):
//   P = softmax(q k^T * scale, masked unless j <= i and same document) (= probs),
//   out = dropout(P) v (= out), dqkv (=).
// The CPU twin's forward against an independent per-head computation in double (with and
// without Philox dropout on the probabilities, with and without document segments), its
// backward against central differences in double (the dropout mask depends only on (seed,
// offset, index), so it is fixed under FD), causality, "=" semantics of backward; documents
// against separate runs over each document's sub-sequence and the mask against Megatron's
// get_ltor_masks_and_position_ids; head_offset/total_heads: two half-head calls against one
// call over all heads with dropout; argument checks; then the GPU against the CPU twin in bf16
// and f32 (with random segments, dropout and a head offset).
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

using Segs = std::vector<int32_t>;  // [B*T] document ids; empty: plain causal

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

// The documented construction: seg[b*T + t] = number of eod tokens among positions 0..t-1.
Segs segments_from_tokens(const std::vector<int32_t>& tokens, int64_t batch, int64_t seq,
                          int32_t eod) {
  Segs seg(batch * seq);
  for (int64_t b = 0; b < batch; ++b) {
    int32_t n = 0;
    for (int64_t t = 0; t < seq; ++t) {
      seg[b * seq + t] = n;
      if (tokens[b * seq + t] == eod) ++n;
    }
  }
  return seg;
}

// Random tokens in [0, vocab) with eod = 0 (documents of ~vocab tokens), plus eods at positions
// 2 and 3 of every sample (so position 3 is a document of length 1) and at T-2 (the last
// position is one, too).
Segs random_segments(int64_t batch, int64_t seq, uint64_t seed, int32_t vocab = 4) {
  std::vector<int32_t> tok = testing::random_ints(batch * seq, seed, 0, vocab);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t t : {int64_t{2}, int64_t{3}, seq - 2}) {
      if (t >= 0 && t < seq) tok[b * seq + t] = 0;
    }
  }
  return segments_from_tokens(tok, batch, seq, 0);
}

// An [N] i32 segments view in `pool`, or the empty view for plain causal.
engine::ConstTensorView segments_view(TensorPool& pool, const Segs& seg) {
  if (seg.empty()) return {};
  return pool.from_i32(seg, {static_cast<int64_t>(seg.size())});
}

// Independent forward in double: gather one head's q, k, v matrices, then the textbook math
// (the visible keys of query i are collected first; dropout in the model-wide numbering).
void reference_forward(const AttentionArgs& a, const std::vector<double>& qkv, const Segs& seg,
                       std::vector<double>* out, std::vector<double>* probs) {
  const int64_t T = a.seq, Dh = a.head_dim, hd = a.heads * Dh;
  const int64_t TH = a.total_heads == 0 ? a.heads : a.total_heads;
  out->assign(out_elems(a), 0.0);
  probs->assign(prob_elems(a), 0.0);
  const double keep_scale = 1.0 / (1.0 - static_cast<double>(a.dropout_p));
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < a.heads; ++h) {
      auto at = [&](int part, int64_t t, int64_t d) {
        return qkv[(b * T + t) * 3 * hd + part * hd + h * Dh + d];
      };
      for (int64_t i = 0; i < T; ++i) {
        std::vector<int64_t> keys;
        for (int64_t j = 0; j <= i; ++j) {
          if (seg.empty() || seg[b * T + j] == seg[b * T + i]) keys.push_back(j);
        }
        std::vector<double> s(keys.size());
        double mx = -1e300, sum = 0;
        for (size_t n = 0; n < keys.size(); ++n) {
          double dot = 0;
          for (int64_t d = 0; d < Dh; ++d) dot += at(0, i, d) * at(1, keys[n], d);
          s[n] = dot * a.scale;
          mx = std::max(mx, s[n]);
        }
        for (double v : s) sum += std::exp(v - mx);
        const int64_t row = ((b * a.heads + h) * T + i) * T;
        const uint64_t drow = ((b * TH + a.head_offset + h) * T + i) * T;
        for (size_t n = 0; n < keys.size(); ++n) {
          const int64_t j = keys[n];
          const double p = std::exp(s[n] - mx) / sum;
          (*probs)[row + j] = p;
          double pd = p;
          if (a.dropout_p > 0.0f) {
            const bool keep = engine::philox_uniform_at(a.seed, a.offset, drow + j) >= a.dropout_p;
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

void check_cpu_forward(const AttentionArgs& a, DType dtype, Tol tol, const Segs& seg = {}) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const std::vector<float> x = testing::random_uniform(qkv_elems(a), 3, -1.5f, 1.5f);
  TensorView qkv = pool.from(x, dtype, {a.batch * a.seq, 3 * a.heads * a.head_dim});
  TensorView out = pool.empty(dtype, {a.batch * a.seq, a.heads * a.head_dim});
  TensorView probs = pool.empty(dtype, {a.batch, a.heads, a.seq, a.seq});
  attention_forward(a, out, probs, qkv, segments_view(pool, seg), {}, stream);
  std::vector<double> ref_out, ref_probs;
  reference_forward(a, std::vector<double>(x.begin(), x.end()), seg, &ref_out, &ref_probs);
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(out), ref_out, tol));
  EXPECT_TRUE(testing::tensors_near(testing::to_host_f64(probs), ref_probs, tol));
  // Rows sum to one; every masked entry (future or another document) is exactly zero.
  const std::vector<double> p = testing::to_host_f64(probs);
  for (int64_t r = 0; r < a.batch * a.heads * a.seq; ++r) {
    const int64_t i = r % a.seq, b = r / (a.heads * a.seq);
    double sum = 0;
    for (int64_t j = 0; j < a.seq; ++j) {
      sum += p[r * a.seq + j];
      const bool visible = j <= i && (seg.empty() || seg[b * a.seq + j] == seg[b * a.seq + i]);
      if (!visible) {
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

TEST(AttentionCpu, ForwardWithSegmentsMatchesReference) {
  for (float p : {0.0f, 0.25f}) {
    SCOPED_TRACE(::testing::Message() << "dropout_p=" << p);
    check_cpu_forward(make_args(2, 9, 2, 3, p), DType::kF64, Tol{1e-12, 1e-12, 1e-20},
                      random_segments(2, 9, 5));
    check_cpu_forward(make_args(3, 11, 3, 4, p), DType::kF32, Tol{1e-5, 1e-5, 1e-10},
                      random_segments(3, 11, 6));
  }
}

TEST(AttentionCpu, ForwardWithHeadOffsetMatchesReference) {
  AttentionArgs a = make_args(2, 7, 2, 4, 0.3f);
  a.total_heads = 5;
  a.head_offset = 3;
  check_cpu_forward(a, DType::kF64, Tol{1e-12, 1e-12, 1e-20}, random_segments(2, 7, 8));
}

// Backward of the f64 twin against central differences of L = sum(out * W).
void check_cpu_backward_fd(const AttentionArgs& a, const Segs& seg = {}) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const engine::ConstTensorView segs = segments_view(pool, seg);
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
    attention_forward(a, out, probs, qkv, segs, {}, stream);
    const double* o = static_cast<const double*>(out.data);
    double l = 0;
    for (int64_t i = 0; i < out_elems(a); ++i) l += o[i] * wp[i];
    return l;
  };
  const std::vector<double> numeric = testing::numeric_gradient(loss, x0);
  loss(x0);  // forward at x0 (probs saved)
  TensorView dqkv = pool.empty(DType::kF64, {bt, 3 * hd});
  attention_backward(a, dqkv, w, qkv, probs, segs, {}, stream);
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
  attention_backward(a, dqkv, w, qkv, probs, segs, {}, stream);
  EXPECT_EQ(testing::to_host_f64(dqkv), analytic);
}

TEST(AttentionCpu, BackwardMatchesFiniteDifferences) {
  check_cpu_backward_fd(make_args(2, 5, 2, 3));
}

TEST(AttentionCpu, BackwardWithDropoutMatchesFiniteDifferences) {
  check_cpu_backward_fd(make_args(2, 5, 2, 3, 0.3f));
}

TEST(AttentionCpu, BackwardWithSegmentsMatchesFiniteDifferences) {
  check_cpu_backward_fd(make_args(2, 8, 2, 3), random_segments(2, 8, 11));
  AttentionArgs a = make_args(2, 8, 2, 3, 0.3f);
  a.total_heads = 3;
  a.head_offset = 1;
  check_cpu_backward_fd(a, random_segments(2, 8, 12));
}

// The CPU twin's out, probs and dqkv (f64) for qkv x, upstream gradient dy and segments seg.
struct CpuRun {
  std::vector<double> out, probs, dqkv;
};
CpuRun run_cpu(const AttentionArgs& a, const std::vector<double>& x, const std::vector<double>& dy,
               const Segs& seg) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const int64_t bt = a.batch * a.seq, hd = a.heads * a.head_dim;
  TensorView qkv = pool.from_f64(x, {bt, 3 * hd});
  TensorView out = pool.empty(DType::kF64, {bt, hd});
  TensorView probs = pool.empty(DType::kF64, {a.batch, a.heads, a.seq, a.seq});
  TensorView dqkv = pool.empty(DType::kF64, {bt, 3 * hd});
  const engine::ConstTensorView segs = segments_view(pool, seg);
  attention_forward(a, out, probs, qkv, segs, {}, stream);
  attention_backward(a, dqkv, pool.from_f64(dy, {bt, hd}), qkv, probs, segs, {}, stream);
  return {testing::to_host_f64(out), testing::to_host_f64(probs), testing::to_host_f64(dqkv)};
}

std::vector<double> random_f64(int64_t n, uint64_t seed) {
  const std::vector<float> f = testing::random_uniform(n, seed, -1.5f, 1.5f);
  return std::vector<double>(f.begin(), f.end());
}

// A sample holding several documents is, per document, plain causal attention over that
// document's sub-sequence alone: run the op with T = document length on the sliced rows.
TEST(AttentionCpu, DocumentsEqualSeparateSubsequences) {
  const int64_t B = 2, T = 10, H = 2, Dh = 3, hd = H * Dh;
  const AttentionArgs a = make_args(B, T, H, Dh);
  // eod = 7; sample 0: documents [0, 3), [3, 4), [4, 9), [9, 10); sample 1: [0, 1), [1, 10).
  std::vector<int32_t> tok = testing::random_ints(B * T, 21, 0, 7);
  for (int64_t t : {2, 3, 8}) tok[t] = 7;
  tok[T + 0] = 7;
  const Segs seg = segments_from_tokens(tok, B, T, 7);
  const std::vector<double> x = random_f64(qkv_elems(a), 22), dy = random_f64(out_elems(a), 23);
  const CpuRun full = run_cpu(a, x, dy, seg);
  int64_t docs = 0;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t start = 0; start < T;) {
      int64_t end = start + 1;
      while (end < T && seg[b * T + end] == seg[b * T + start]) ++end;
      const int64_t len = end - start, r0 = b * T + start;
      ++docs;
      SCOPED_TRACE(::testing::Message()
                   << "sample " << b << " document [" << start << ", " << end << ")");
      const AttentionArgs sa = make_args(1, len, H, Dh);
      const CpuRun sub =
          run_cpu(sa, std::vector<double>(x.begin() + r0 * 3 * hd, x.begin() + (r0 + len) * 3 * hd),
                  std::vector<double>(dy.begin() + r0 * hd, dy.begin() + (r0 + len) * hd), {});
      const std::vector<double> full_out(full.out.begin() + r0 * hd,
                                         full.out.begin() + (r0 + len) * hd);
      const std::vector<double> full_dqkv(full.dqkv.begin() + r0 * 3 * hd,
                                          full.dqkv.begin() + (r0 + len) * 3 * hd);
      const Tol tight{1e-13, 1e-12, 1e-24};
      EXPECT_TRUE(testing::tensors_near(full_out, sub.out, tight)) << "out";
      // A length-1 document has P = [1]: its dq and dk are exactly zero.
      EXPECT_TRUE(testing::tensors_near(full_dqkv, sub.dqkv, tight, /*allow_zero_ref=*/true))
          << "dqkv";
      std::vector<double> block;
      for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < len; ++i)
          for (int64_t j = 0; j < len; ++j)
            block.push_back(full.probs[((b * H + h) * T + start + i) * T + start + j]);
      EXPECT_TRUE(testing::tensors_near(block, sub.probs, tight)) << "probs";
      start = end;
    }
  }
  EXPECT_EQ(docs, 6);
}

// The nonzero pattern of P is exactly Megatron's get_ltor_masks_and_position_ids mask with
// reset_attention_mask: tril(ones(T, T)), then for each eod at i: mask[i+1:, :i+1] = 0.
TEST(AttentionCpu, SegmentsMatchMegatronResetAttentionMask) {
  const int64_t B = 3, T = 12, H = 1, Dh = 4;
  const int32_t eod = 0;
  std::vector<int32_t> tok = testing::random_ints(B * T, 31, 0, 3);
  tok[T + 5] = tok[T + 6] = eod;  // consecutive eods: a length-1 document
  tok[2 * T + T - 1] = eod;       // an eod at the last position changes nothing
  const Segs seg = segments_from_tokens(tok, B, T, eod);
  const AttentionArgs a = make_args(B, T, H, Dh);
  const CpuRun run = run_cpu(a, random_f64(qkv_elems(a), 32), random_f64(out_elems(a), 33), seg);
  int64_t masked_by_docs = 0;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<int> mask(T * T, 0);
    for (int64_t i = 0; i < T; ++i)
      for (int64_t j = 0; j <= i; ++j) mask[i * T + j] = 1;
    for (int64_t e = 0; e < T; ++e) {
      if (tok[b * T + e] != eod) continue;
      for (int64_t i = e + 1; i < T; ++i)
        for (int64_t j = 0; j <= e; ++j) mask[i * T + j] = 0;
    }
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j < T; ++j) {
        const double p = run.probs[(b * T + i) * T + j];
        if (mask[i * T + j]) {
          EXPECT_GT(p, 0.0) << "b " << b << " i " << i << " j " << j;
        } else {
          EXPECT_EQ(p, 0.0) << "b " << b << " i " << i << " j " << j;
          masked_by_docs += j <= i;
        }
      }
    }
  }
  EXPECT_GT(masked_by_docs, 0);
}

// The columns of heads [h0, h0 + n) of each part of a [rows, 3*H*Dh] qkv-like matrix (parts = 3)
// or of a [rows, H*Dh] one (parts = 1).
std::vector<double> head_cols(const std::vector<double>& m, int64_t rows, int64_t H, int64_t Dh,
                              int parts, int64_t h0, int64_t n) {
  std::vector<double> r;
  for (int64_t i = 0; i < rows; ++i)
    for (int part = 0; part < parts; ++part)
      for (int64_t c = h0 * Dh; c < (h0 + n) * Dh; ++c)
        r.push_back(m[i * parts * H * Dh + part * H * Dh + c]);
  return r;
}

// Heads [h0, h0 + n) of [B, H, T, T] probabilities.
std::vector<double> head_probs(const std::vector<double>& p, int64_t B, int64_t H, int64_t T,
                               int64_t h0, int64_t n) {
  std::vector<double> r;
  for (int64_t b = 0; b < B; ++b)
    r.insert(r.end(), p.begin() + (b * H + h0) * T * T, p.begin() + (b * H + h0 + n) * T * T);
  return r;
}

// Tensor-parallel numbering: heads [0, H/2) and [H/2, H) as two calls with head_offset and
// total_heads draw the dropout masks of one call over all H heads, so out, probs and dqkv match.
TEST(AttentionCpu, HeadOffsetSplitEqualsAllHeads) {
  const int64_t B = 2, T = 9, H = 4, Dh = 3, half = H / 2;
  const AttentionArgs all = make_args(B, T, H, Dh, 0.3f);
  const Segs seg = random_segments(B, T, 41);
  const std::vector<double> x = random_f64(qkv_elems(all), 42);
  const std::vector<double> dy = random_f64(out_elems(all), 43);
  const CpuRun ref = run_cpu(all, x, dy, seg);
  for (int64_t h0 : {int64_t{0}, half}) {
    SCOPED_TRACE(::testing::Message() << "head_offset " << h0);
    AttentionArgs part = make_args(B, T, half, Dh, 0.3f);
    part.total_heads = H;
    part.head_offset = h0;
    const std::vector<double> xs = head_cols(x, B * T, H, Dh, 3, h0, half);
    const std::vector<double> dys = head_cols(dy, B * T, H, Dh, 1, h0, half);
    const CpuRun got = run_cpu(part, xs, dys, seg);
    const Tol tight{1e-13, 1e-12, 1e-24};
    EXPECT_TRUE(
        testing::tensors_near(got.out, head_cols(ref.out, B * T, H, Dh, 1, h0, half), tight))
        << "out";
    EXPECT_TRUE(testing::tensors_near(got.probs, head_probs(ref.probs, B, H, T, h0, half), tight))
        << "probs";
    EXPECT_TRUE(testing::tensors_near(got.dqkv, head_cols(ref.dqkv, B * T, H, Dh, 3, h0, half),
                                      tight, /*allow_zero_ref=*/true))
        << "dqkv";
    // Numbered as a model of `half` heads instead, the same heads draw other masks.
    AttentionArgs local = part;
    local.total_heads = 0;
    local.head_offset = 0;
    EXPECT_NE(run_cpu(local, xs, dys, seg).out, got.out);
  }
}

TEST(AttentionCpuDeathTest, RejectsBadSegmentsAndHeadRange) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  const AttentionArgs a = make_args(2, 4, 2, 3);
  const int64_t bt = a.batch * a.seq, hd = a.heads * a.head_dim;
  TensorView qkv = pool.from(testing::random_uniform(qkv_elems(a), 1), DType::kF32, {bt, 3 * hd});
  TensorView out = pool.empty(DType::kF32, {bt, hd});
  TensorView probs = pool.empty(DType::kF32, {a.batch, a.heads, a.seq, a.seq});
  TensorView seg_f32 = pool.from(std::vector<float>(bt, 0.0f), DType::kF32, {bt});
  TensorView seg_short = pool.from_i32(Segs(bt - 1, 0), {bt - 1});
  TensorView seg_2d = pool.from_i32(Segs(bt, 0), {a.batch, a.seq});
  EXPECT_DEATH(attention_forward(a, out, probs, qkv, seg_f32, {}, stream), "segments");
  EXPECT_DEATH(attention_forward(a, out, probs, qkv, seg_short, {}, stream), "segments");
  EXPECT_DEATH(attention_forward(a, out, probs, qkv, seg_2d, {}, stream), "segments");
  EXPECT_DEATH(attention_backward(a, pool.empty(DType::kF32, {bt, 3 * hd}), out, qkv, probs,
                                  seg_short, {}, stream),
               "segments");
  AttentionArgs bad = a;
  bad.total_heads = 3;
  bad.head_offset = 2;  // heads [2, 4) of 3
  EXPECT_DEATH(attention_forward(bad, out, probs, qkv, {}, {}, stream), "head_offset");
  bad.total_heads = 0;
  bad.head_offset = 1;  // total_heads 0 means heads: no room for an offset
  EXPECT_DEATH(attention_forward(bad, out, probs, qkv, {}, {}, stream), "head_offset");
  bad.head_offset = -1;
  EXPECT_DEATH(attention_forward(bad, out, probs, qkv, {}, {}, stream), "head_offset");
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
    attention_forward(a, out, probs, pool.from_f64(in, {bt, 3 * hd}), {}, {}, stream);
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

void check_gpu(const AttentionArgs& a, DType act, const GpuTols& tol, const Segs& seg = {}) {
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
    r.dqkv = pool.empty(t, {bt, 3 * hd});  // outputs poisoned (NaN) by empty()
    const engine::ConstTensorView segs = segments_view(pool, seg);
    attention_forward(a, r.out, r.probs, qkv, segs, ws, s);
    attention_backward(a, r.dqkv, pool.from(dy, t, {bt, hd}), qkv, r.probs, segs, ws, s);
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

TEST(AttentionGpu, Bf16SegmentsDropoutHeadOffset) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_gpu(make_args(2, 37, 3, 16, 0.1f), DType::kBF16, kBf16Tols, random_segments(2, 37, 51));
  AttentionArgs a = make_args(3, 128, 2, 64, 0.1f);
  a.total_heads = 6;
  a.head_offset = 4;
  check_gpu(a, DType::kBF16, kBf16Tols, random_segments(3, 128, 52, 40));
}

TEST(AttentionGpu, F32SegmentsDropoutHeadOffset) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_gpu(make_args(2, 37, 3, 16, 0.0f), DType::kF32, kF32Tols, random_segments(2, 37, 53));
  AttentionArgs a = make_args(2, 45, 3, 8, 0.2f);
  a.total_heads = 7;
  a.head_offset = 2;
  check_gpu(a, DType::kF32, kF32Tols, random_segments(2, 45, 54, 12));
  // T = 4 with eods at 2 and 3: documents [0, 3), [3, 4).
  check_gpu(make_args(2, 4, 2, 5, 0.3f), DType::kF32, kF32Tols, random_segments(2, 4, 55));
}

TEST(AttentionGpu, F32Tight) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_gpu(make_args(2, 37, 3, 16, 0.1f), DType::kF32, kF32Tols);
  check_gpu(make_args(3, 9, 2, 5, 0.0f), DType::kF32, kF32Tols);
  check_gpu(make_args(1, 1, 1, 8, 0.0f), DType::kF32, kF32Tols);  // T = 1: P = [1]
}

}  // namespace
}  // namespace anvil::ops
