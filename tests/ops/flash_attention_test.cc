// Tests of the flash attention op (ops/flash_attention.h).
// CPU twin: against the unfused reference op (ops/attention.h, itself checked against finite
// differences) for GPT's causal case with documents, dropout and a TP head offset, forward and
// backward; against central differences in f64 for every other feature (bidirectional, key
// padding, ALiBi, relative buckets with the table gradient, cross-attention with Tq != Tk,
// no scaling, dropout); grouped-query attention against the same problem with K/V expanded per
// query head, and against central differences; empty rows (all keys padded) give out 0, lse +inf
// and zero gradients. The bidirectional prefix (prefix-LM per sample, packed segments with input
// prefixes) against a dense mask built as Megatron-DeepSpeed builds it, the unfused op, and
// central differences. The saved dropout mask's bits against Philox, and backward reading them.
// The CUDA kernels against this twin: tests/ops/flash_attention_gpu_test.cc.
#include "ops/flash_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/philox.h"
#include "engine/tensor.h"
#include "gtest/gtest.h"
#include "ops/attention.h"
#include "tests/ops/flash_attention_testing.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::TensorPool;
using testing::TestStream;
using testing::Tol;
using namespace flash_testing;  // NOLINT: the test problems of this op

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
  // Rows of the parts side by side (each part [rows, its size / rows]).
  auto interleave = [&](int64_t rows, std::vector<const std::vector<double>*> parts) {
    std::vector<double> out;
    for (int64_t row = 0; row < rows; ++row) {
      for (const std::vector<double>* src : parts) {
        const int64_t w = static_cast<int64_t>(src->size()) / rows;
        for (int64_t col = 0; col < w; ++col) out.push_back((*src)[row * w + col]);
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

// The saved dropout mask (AttentionMasks::dropout_keep): forward writes bit keep_bit(i, j) of
// word keep_word(b, h, i, j) as Philox keeps element ((b TH + head_offset + h) Tq + i) Tk + j
// (computed here from the numbering of ops/flash_attention.h), and no bit past Tq or Tk; the
// results equal the run without a saved mask exactly; and backward reads the saved bits (with
// every bit flipped between forward and backward, dv changes). Tq and Tk past a strip and a
// key group, documents, cross-attention, a TP head offset.
TEST(FlashAttentionCpu, SavedDropoutMaskIsPhiloxAndBackwardReadsIt) {
  Case c;
  c.batch = 2, c.tq = 19, c.tk = 70, c.heads = 2, c.dh = 3, c.causal = false, c.cross = true;
  c.dropout = 0.3f, c.total_heads = 5, c.head_offset = 1, c.kv_lengths = {70, 41};
  const Inputs in = random_inputs(c, 61);
  Case s = c;
  s.save_keep = true;
  const Results plain = run(c, Device::kCpu, DType::kF64, in);
  const Results saved = run(s, Device::kCpu, DType::kF64, in);
  ASSERT_EQ(static_cast<int64_t>(saved.keep.size()), 2 * 2 * 2 * 2 * 32);  // B H strips groups
  int64_t kept = 0, set = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.tq; ++i) {
        for (int64_t j = 0; j < c.tk; ++j) {
          const uint64_t e = static_cast<uint64_t>(((b * 5 + 1 + h) * c.tq + i) * c.tk + j);
          const bool want = engine::philox_uniform_at(99, 5, e) >= 0.3f;
          kept += want;
          ASSERT_EQ(keep_bit_of(c, saved.keep, b, h, i, j), want)
              << b << " " << h << " " << i << " " << j;
        }
      }
    }
  }
  for (int32_t w : saved.keep) set += __builtin_popcount(static_cast<uint32_t>(w));
  EXPECT_EQ(set, kept) << "bits set past Tq or Tk";
  EXPECT_GT(kept, 0);
  EXPECT_EQ(saved.out, plain.out);
  EXPECT_EQ(saved.lse, plain.lse);
  EXPECT_EQ(saved.dq, plain.dq);
  EXPECT_EQ(saved.dk, plain.dk);
  EXPECT_EQ(saved.dv, plain.dv);

  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  Views w = make_views(pool, s, DType::kF64, in.xq, in.xkv, in.dout);
  const FlashAttentionArgs a = args_of(s);
  flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream);
  int32_t* words = w.masks.dropout_keep.as<int32_t>();
  for (int64_t e = 0; e < w.masks.dropout_keep.dim(0); ++e) words[e] = ~words[e];
  flash_attention_backward(a, w.dq, w.dk, w.dv, {}, w.dout, w.q, w.k, w.v, w.out, w.lse, w.masks,
                           pool.workspace(0), stream);
  const std::vector<double> kv = testing::to_host_f64(w.dkv_buf);
  EXPECT_NE(columns(kv, w.dkv_buf.dim(1), w.dv, w.dkv_buf), plain.dv)
      << "backward did not read the saved bits";
}

// Grouped-query attention against the naive reference: the same problem with K/V expanded to
// every query head (kv head h / group copied to head h); the expanded run's dk, dv summed over
// each group are the grouped run's. Self-attention (fused q | k | v) and cross-attention,
// with documents, dropout, ALiBi and a TP head offset.
void check_gqa_against_expanded(const Case& g) {
  Case e = g;
  e.kv_heads = 0;
  const int64_t H = g.heads, KV = kv_heads_of(g), G = H / KV, Dh = g.dh;
  const int64_t hd = H * Dh, kd = KV * Dh;
  const Inputs in = random_inputs(g, 51);
  Inputs ex;
  ex.dout = in.dout;
  // Row r of a [q? | k | v] buffer: the expanded row copies kv head h / G into head h.
  auto expand = [&](const std::vector<float>& x, int64_t rows, int64_t q_cols) {
    const int64_t w = q_cols + 2 * kd;
    std::vector<float> out;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * w;
      out.insert(out.end(), row, row + q_cols);
      for (int64_t part = 0; part < 2; ++part) {
        for (int64_t h = 0; h < H; ++h) {
          const float* src = row + q_cols + part * kd + h / G * Dh;
          out.insert(out.end(), src, src + Dh);
        }
      }
    }
    return out;
  };
  if (g.cross) {
    ex.xq = in.xq;
    ex.xkv = expand(in.xkv, g.batch * g.tk, 0);
  } else {
    ex.xq = expand(in.xq, g.batch * g.tq, hd);
  }
  const Results rg = run(g, Device::kCpu, DType::kF64, in);
  const Results re = run(e, Device::kCpu, DType::kF64, ex);
  const Tol tight{1e-12, 1e-10, 1e-20};
  EXPECT_TRUE(testing::tensors_near(rg.out, re.out, tight)) << "out";
  EXPECT_TRUE(testing::tensors_near(rg.lse, re.lse, tight)) << "lse";
  EXPECT_TRUE(testing::tensors_near(rg.dq, re.dq, tight)) << "dq";
  const int64_t rows = g.batch * g.tk;
  std::vector<double> dk(static_cast<size_t>(rows * kd), 0.0), dv(dk.size(), 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t h = 0; h < H; ++h) {
      for (int64_t d = 0; d < Dh; ++d) {
        dk[r * kd + h / G * Dh + d] += re.dk[r * hd + h * Dh + d];
        dv[r * kd + h / G * Dh + d] += re.dv[r * hd + h * Dh + d];
      }
    }
  }
  EXPECT_TRUE(testing::tensors_near(rg.dk, dk, tight)) << "dk";
  EXPECT_TRUE(testing::tensors_near(rg.dv, dv, tight)) << "dv";
}

TEST(FlashAttentionCpu, GroupedQueryMatchesExpandedKeysAndValues) {
  for (const int64_t kv : {1, 2}) {  // multi-query and two groups of two
    Case c;
    c.batch = 2, c.tq = c.tk = 7, c.heads = 4, c.dh = 3, c.kv_heads = kv, c.dropout = 0.2f;
    c.total_heads = 8, c.head_offset = 4;
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t t = 0; t < c.tq; ++t) c.segs_q.push_back(t < 3 + b ? 0 : 1);
    }
    c.segs_k = c.segs_q;
    SCOPED_TRACE(kv);
    check_gqa_against_expanded(c);
    Case x;  // cross-attention, bidirectional, ALiBi, padding
    x.batch = 2, x.tq = 4, x.tk = 6, x.heads = 4, x.dh = 2, x.kv_heads = kv, x.cross = true;
    x.causal = false, x.bias = AttentionBias::kAlibi, x.kv_lengths = {6, 3};
    check_gqa_against_expanded(x);
  }
}

TEST(FlashAttentionCpu, GroupedQueryBackwardMatchesFiniteDifferences) {
  Case c;
  c.batch = 2, c.tq = c.tk = 5, c.heads = 4, c.dh = 2, c.kv_heads = 2;
  check_fd(c);
  c.kv_heads = 1, c.dropout = 0.3f;
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

// ---- bidirectional prefix (prefix-LM, packed T0/MTF) ------------------------------------------

// The dense [B, T, T] mask as Megatron-DeepSpeed builds it (megatron/utils.py
// get_ltor_masks_and_position_ids and the packed MTF masks): lower triangle, minus the keys of
// other segments, plus the square [s, pe) x [s, pe) of each segment [s, e) whose prefix ends
// at pe. Built from the segment ids and each segment's prefix end, not from prefix_end per
// query, so it checks the op's per-query rule independently.
std::vector<char> dense_prefix_mask(const Case& c) {
  const int64_t T = c.tq;
  std::vector<char> m(c.batch * T * T, 0);
  for (int64_t b = 0; b < c.batch; ++b) {
    auto seg = [&](int64_t t) { return c.segs_q.empty() ? 0 : c.segs_q[b * T + t]; };
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j <= i; ++j) m[(b * T + i) * T + j] = seg(i) == seg(j);
    }
    int64_t s = 0;
    for (int64_t e = 1; e <= T; ++e) {
      if (e < T && seg(e) == seg(s)) continue;
      const int64_t pe = std::min<int64_t>(T, c.prefix_end[b * T + s]);
      for (int64_t i = s; i < pe; ++i) {
        for (int64_t j = s; j < pe; ++j) m[(b * T + i) * T + j] = 1;
      }
      s = e;
    }
  }
  return m;
}

// out of self-attention over the fused q | k | v (in.xq) with a dense mask, in double.
std::vector<double> dense_attention(const Case& c, const Inputs& in, const std::vector<char>& m) {
  const int64_t T = c.tq, hd = c.heads * c.dh;
  std::vector<double> out(c.batch * T * hd, 0.0);
  auto x = [&](int64_t b, int64_t t, int64_t part, int64_t h, int64_t d) {
    return static_cast<double>(in.xq[(b * T + t) * 3 * hd + part * hd + h * c.dh + d]);
  };
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < T; ++i) {
        std::vector<double> s(T, -std::numeric_limits<double>::infinity());
        double mx = s[0];
        for (int64_t j = 0; j < T; ++j) {
          if (!m[(b * T + i) * T + j]) continue;
          double dot = 0;
          for (int64_t d = 0; d < c.dh; ++d) dot += x(b, i, 0, h, d) * x(b, j, 1, h, d);
          s[j] = c.scale * dot;
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < T; ++j) sum += std::exp(s[j] - mx);
        for (int64_t j = 0; j < T; ++j) {
          const double p = std::exp(s[j] - mx) / sum;
          for (int64_t d = 0; d < c.dh; ++d) {
            out[(b * T + i) * hd + h * c.dh + d] += p * x(b, j, 2, h, d);
          }
        }
      }
    }
  }
  return out;
}

// The unfused op (ops/attention.h) on the same problem: out and dqkv, unpacked as the flash
// Results are.
Results unfused(const Case& c, const Inputs& in) {
  TestStream stream(Device::kCpu);
  TensorPool pool(Device::kCpu);
  AttentionArgs u{c.batch,   c.tq, c.heads, c.dh,          c.scale,
                  c.dropout, 99,   5,       c.total_heads, c.head_offset};
  const int64_t bt = c.batch * c.tq, hd = c.heads * c.dh;
  u.prefix_end = pool.from_i32(c.prefix_end, {bt});
  TensorView qkv = pool.from(in.xq, DType::kF64, {bt, 3 * hd});
  TensorView out = pool.empty(DType::kF64, {bt, hd});
  TensorView probs = pool.empty(DType::kF64, {c.batch, c.heads, c.tq, c.tq});
  TensorView dqkv = pool.empty(DType::kF64, {bt, 3 * hd});
  TensorView dout = pool.from(in.dout, DType::kF64, {bt, hd});
  ConstTensorView segs;
  if (!c.segs_q.empty()) segs = pool.from_i32(c.segs_q, {bt});
  attention_forward(u, out, probs, qkv, segs, {}, stream);
  attention_backward(u, dqkv, dout, qkv, probs, segs, {}, stream);
  Results r;
  r.out = testing::to_host_f64(out);
  const std::vector<double> g = testing::to_host_f64(dqkv);
  for (int64_t row = 0; row < bt; ++row) {
    for (int64_t col = 0; col < hd; ++col) {
      r.dq.push_back(g[row * 3 * hd + col]);
      r.dk.push_back(g[row * 3 * hd + hd + col]);
      r.dv.push_back(g[row * 3 * hd + 2 * hd + col]);
    }
  }
  return r;
}

// Flash (CPU twin) and unfused against the dense mask without dropout, then against each other
// (forward and backward) with dropout and a TP head offset.
void check_prefix_against_dense_and_unfused(Case c) {
  const Tol tight{1e-12, 1e-10, 1e-20};
  const Inputs in = random_inputs(c, 41);
  const std::vector<double> dense = dense_attention(c, in, dense_prefix_mask(c));
  EXPECT_TRUE(testing::tensors_near(run(c, Device::kCpu, DType::kF64, in).out, dense, tight))
      << "flash vs dense";
  EXPECT_TRUE(testing::tensors_near(unfused(c, in).out, dense, tight)) << "unfused vs dense";
  c.dropout = 0.2f, c.total_heads = 5, c.head_offset = 2;
  const Results f = run(c, Device::kCpu, DType::kF64, in), u = unfused(c, in);
  EXPECT_TRUE(testing::tensors_near(f.out, u.out, tight)) << "out";
  EXPECT_TRUE(testing::tensors_near(f.dq, u.dq, tight)) << "dq";
  EXPECT_TRUE(testing::tensors_near(f.dk, u.dk, tight)) << "dk";
  EXPECT_TRUE(testing::tensors_near(f.dv, u.dv, tight)) << "dv";
}

TEST(FlashAttentionCpu, PrefixLmMatchesDenseMaskAndUnfused) {
  Case c;
  c.batch = 4, c.tq = c.tk = 11, c.heads = 2, c.dh = 4;
  add_sample_prefixes(&c, {4, 0, 11, 1});  // a prefix, none, the whole sample, the first token
  check_prefix_against_dense_and_unfused(c);
}

TEST(FlashAttentionCpu, PackedSegmentPrefixesMatchDenseMaskAndUnfused) {
  Case c;
  c.batch = 2, c.tq = c.tk = 13, c.heads = 2, c.dh = 4;
  for (int64_t b = 0; b < c.batch; ++b) {  // segments of 5, 1, 4, 3 and 2, 7, 4 tokens
    const std::vector<int64_t> ends =
        b == 0 ? std::vector<int64_t>{5, 6, 10, 13} : std::vector<int64_t>{2, 9, 13};
    int32_t seg = 0;
    for (int64_t t = 0; t < c.tq; ++t) {
      if (t == ends[seg]) ++seg;
      c.segs_q.push_back(seg);
    }
  }
  c.segs_k = c.segs_q;
  add_segment_prefixes(&c);
  check_prefix_against_dense_and_unfused(c);
}

TEST(FlashAttentionCpu, BackwardMatchesFiniteDifferencesPrefix) {
  Case c;
  c.batch = 2, c.tq = c.tk = 6, c.heads = 2, c.dh = 3;
  add_sample_prefixes(&c, {3, 1});
  check_fd(c);
  Case s;  // packed segments with their input prefixes, and dropout
  s.batch = 1, s.tq = s.tk = 7, s.heads = 2, s.dh = 3, s.dropout = 0.2f;
  s.segs_q = s.segs_k = {0, 0, 0, 0, 1, 1, 1};
  add_segment_prefixes(&s);
  check_fd(s);
}

TEST(FlashAttentionCpu, CudaKernelsTakeBf16AndF16HeadSizes32To256InStepsOf8) {
  for (int64_t dh = 0; dh <= 272; ++dh) {
    const bool want = dh % 8 == 0 && dh >= 32 && dh <= 256;
    EXPECT_EQ(flash_attention_cuda_supports(DType::kBF16, dh), want) << dh;
    EXPECT_EQ(flash_attention_cuda_supports(DType::kF16, dh), want) << dh;
    EXPECT_FALSE(flash_attention_cuda_supports(DType::kF32, dh)) << dh;
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
  a = args_of(c);
  w = make_views(pool, c, DType::kF32, in.xq, in.xkv, in.dout);
  a.kv_heads = 3;  // heads 2
  EXPECT_DEATH(flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream),
               "kv_heads must divide heads");
  a.kv_heads = 1;  // k, v still hold 2 heads
  EXPECT_DEATH(flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream), "k must");
  a = args_of(c);
  a.causal = false;
  w.masks.prefix_end = pool.from_i32(std::vector<int32_t>(c.batch * c.tq, 2), {c.batch * c.tq});
  EXPECT_DEATH(flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream),
               "prefix_end widens the causal mask");
}

}  // namespace
}  // namespace anvil::ops
