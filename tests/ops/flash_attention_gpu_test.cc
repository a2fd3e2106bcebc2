// The CUDA flash attention kernels (ops/cuda/flash_attention_*) against the CPU twin on random
// data: one f32 CPU reference on inputs representable in both bf16 and f16, then the bf16 and
// the f16 kernels on the same values, outputs poisoned (NaN) before each run, so an unwritten
// element or a NaN fails. Head sizes 32, 40, 64, 80, 96, 128, 168, 256 (tile widths 64-256,
// padded inside the kernels when smaller; 168 for the width 192), lengths that are not tile
// multiples (1, 17, 1000, 2049), every mask kind (causal, bidirectional, documents, key padding
// with an empty sample, cross-attention lengths, ALiBi, relative buckets, bidirectional prefixes
// per sample and per packed segment), dropout on and off, a TP head offset; backward is bitwise
// reproducible. The Hopper forward (AttentionKernel::kWgmma) against the same CPU twin on its
// cases (bf16, heads 64 and 128). Skipped without a GPU. Sizes are kept so that the
// single-threaded CPU reference stays near a minute in all.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/dtype.h"
#include "gtest/gtest.h"
#include "ops/flash_attention.h"
#include "tests/ops/flash_attention_testing.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops {
namespace {

using engine::Device;
using engine::DType;
using testing::Tol;
using namespace flash_testing;  // NOLINT: the test problems of this op

// Every tile width (64: 32, 40, 64; 96: 80, 96; 128; 192: 168; 256), full and zero-padded.
constexpr int64_t kHeadSizes[] = {32, 40, 64, 80, 96, 128, 168, 256};
constexpr DType kDtypes[] = {DType::kBF16, DType::kF16};

// Values held exactly by both bf16 and f16: bf16-rounded, magnitudes under f16's smallest
// normal (2^-14, where f16 would round again) flushed to 0.
std::vector<float> round_both(std::vector<float> v) {
  for (float& x : v) {
    x = engine::round_to_bf16(x);
    if (std::fabs(x) < 0x1p-14f) x = 0.0f;
  }
  return v;
}

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

Inputs exact_inputs(const Case& c, uint64_t seed) {
  Inputs in = random_inputs(c, seed);
  in.xq = round_both(in.xq);
  in.xkv = round_both(in.xkv);
  in.dout = round_both(in.dout);
  return in;
}

// The saved dropout mask (AttentionMasks::dropout_keep, poisoned before the run): the forward
// kernel's bits at every visible element are the CPU twin's (which test against Philox in
// flash_attention_test.cc), and the backward kernels reading them give bitwise what drawing the
// bits gave (`drawn`, the run without a saved mask), as does the forward.
void expect_saved_mask_same(Case c, const Inputs& in, const Results& drawn, DType dt) {
  c.save_keep = true;
  const Results cpu = run(c, Device::kCpu, DType::kF32, in, false);
  const Results got = run(c, Device::kCuda, dt, in, !drawn.dq.empty());
  int64_t visible = 0, wrong = 0;
  for_each_visible(c, [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    ++visible;
    wrong += keep_bit_of(c, got.keep, b, h, i, j) != keep_bit_of(c, cpu.keep, b, h, i, j);
  });
  EXPECT_GT(visible, 0);
  EXPECT_EQ(wrong, 0) << "saved keep bits unlike the CPU twin's (of " << visible << " visible)";
  EXPECT_EQ(got.out, drawn.out) << "forward with a saved mask";
  EXPECT_EQ(got.lse, drawn.lse);
  EXPECT_EQ(got.dq, drawn.dq) << "backward from the saved mask";
  EXPECT_EQ(got.dk, drawn.dk);
  EXPECT_EQ(got.dv, drawn.dv);
  EXPECT_EQ(got.d_table, drawn.d_table);
}

// Elementwise bounds: out 2% of rms + 2%, gradients 10% of rms + 4% for f16 and 15% for bf16
// (bf16 rounds P and dS 8x coarser: a few elements per 10^5 reach 5-8% of rms over 1000+ keys,
// and with scale 1 at heads of 128-256, where the softmax is nearly one-hot, single elements
// of dk reached 12% and 14%, seen on an H100 in 70 x 133 cross-attention at head 128 and the
// 200-token encoder at head 256, while f16 passed 10% on the same inputs); NMSE 2e-4
// everywhere (seen: 4e-5).
void check_gpu(const Case& c, uint64_t seed, bool backward = true) {
  SCOPED_TRACE(::testing::Message()
               << "B=" << c.batch << " Tq=" << c.tq << " Tk=" << c.tk << " H=" << c.heads
               << " Dh=" << c.dh << " causal=" << c.causal << " drop=" << c.dropout
               << " bias=" << static_cast<int>(c.bias));
  const Inputs in = exact_inputs(c, seed);
  const Results ref = run(c, Device::kCpu, DType::kF32, in, backward);
  for (DType dt : kDtypes) {
    SCOPED_TRACE(engine::dtype_name(dt));
    const Results got = run(c, Device::kCuda, dt, in, backward);
    expect_near_scaled(got.out, ref.out, 2e-2, 2e-2, 2e-4, "out");
    expect_lse_near(got.lse, ref.lse);
    if (!backward) continue;
    // With a single key, dq and dk are exactly zero (softmax of one element is constant).
    const bool single_key = c.tk == 1;
    const double grad_atol = dt == DType::kBF16 ? 0.15 : 0.1;
    expect_near_scaled(got.dq, ref.dq, grad_atol, 4e-2, 2e-4, "dq", single_key);
    expect_near_scaled(got.dk, ref.dk, grad_atol, 4e-2, 2e-4, "dk", single_key);
    expect_near_scaled(got.dv, ref.dv, grad_atol, 4e-2, 2e-4, "dv");
    // d rel_table sums dS over thousands of elements: relative to its rms, like the gradients
    // (it starts at 0.25, so the += is checked too). NMSE 1e-3: dvec from the rounded output
    // shifts every dS of a row alike, and with few buckets over long rows (114 x 300) that
    // shift adds up in the far buckets (seen 4.4e-4 there with bf16).
    if (!ref.d_table.empty()) {
      expect_near_scaled(got.d_table, ref.d_table, 1e-1, 4e-2, 1e-3, "d rel_table");
    }
    const Results again = run(c, Device::kCuda, dt, in);
    EXPECT_EQ(again.dq, got.dq) << "backward must be bitwise reproducible";
    EXPECT_EQ(again.dk, got.dk);
    EXPECT_EQ(again.dv, got.dv);
    EXPECT_EQ(again.d_table, got.d_table);
    if (c.dropout > 0.0f) expect_saved_mask_same(c, in, got, dt);
  }
}

Case gpu_case(int64_t b, int64_t t, int64_t h, int64_t dh, bool causal) {
  Case c;
  c.batch = b, c.tq = c.tk = t, c.heads = h, c.dh = dh, c.causal = causal;
  c.scale = 1.0f / std::sqrt(static_cast<float>(dh));
  return c;
}

// Document ids from random end-of-document positions (about one in 40 tokens).
void add_documents(Case* c, uint64_t seed) {
  const std::vector<int32_t> tok = testing::random_ints(c->batch * c->tq, seed, 0, 40);
  for (int64_t b = 0; b < c->batch; ++b) {
    int32_t doc = 0;
    for (int64_t t = 0; t < c->tq; ++t) {
      c->segs_q.push_back(doc);
      if (tok[b * c->tq + t] == 0) ++doc;
    }
  }
  c->segs_k = c->segs_q;
}

TEST(FlashAttentionGpu, EveryHeadSizeOddLengthsCausalAndNot) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : kHeadSizes) {
    for (bool causal : {true, false}) {
      for (int64_t t : {1, 17}) check_gpu(gpu_case(2, t, 2, dh, causal), 100 + t + dh);
      check_gpu(gpu_case(1, 1000, 1, dh, causal), 7 + dh);
    }
  }
}

// 2049 keys: 33 key tiles, a partial last one; the head sizes of BLOOM-3b and BLOOM-1b1 and the
// split dk / dv kernels of 256.
TEST(FlashAttentionGpu, LongRows) {
  ANVIL_SKIP_WITHOUT_GPU();
  check_gpu(gpu_case(1, 2049, 1, 80, true), 31);
  check_gpu(gpu_case(1, 2049, 1, 96, false), 32);
  check_gpu(gpu_case(1, 2049, 1, 256, true), 33);
}

TEST(FlashAttentionGpu, DocumentsDropoutHeadOffset) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : kHeadSizes) {
    for (float p : {0.0f, 0.1f}) {
      Case c = gpu_case(2, 150, 3, dh, true);
      c.dropout = p, c.total_heads = 8, c.head_offset = 4;
      add_documents(&c, 5 + dh);
      check_gpu(c, 9 + dh);
    }
  }
}

TEST(FlashAttentionGpu, PaddingAlibiCrossAttentionEveryHeadSize) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : kHeadSizes) {
    Case c = gpu_case(3, 130, 2, dh, false);
    c.kv_lengths = {130, 77, 1};
    c.bias = AttentionBias::kAlibi;
    c.total_heads = 6, c.head_offset = 2;
    check_gpu(c, 12 + dh);
    // BLOOM: causal ALiBi with dropout.
    Case a = gpu_case(2, 100, 2, dh, true);
    a.bias = AttentionBias::kAlibi, a.dropout = 0.1f;
    check_gpu(a, 16 + dh);
    Case x = gpu_case(2, 70, 2, dh, false);
    x.cross = true, x.tk = 133, x.kv_lengths = {133, 50}, x.scale = 1.0f;
    check_gpu(x, 13 + dh);
    x.kv_lengths = {0, 64};  // an empty sample: out 0, lse +inf
    check_gpu(x, 14 + dh);
  }
}

// Grouped-query attention (kv_heads 1 and 2 of 4 query heads): forward, dq (kv head h / group)
// and dk/dv summed over the group's query heads by the block of each kv head, with documents,
// dropout and a TP head offset (causal), and padded cross-attention with ALiBi.
TEST(FlashAttentionGpu, GroupedQueryEveryHeadSize) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : kHeadSizes) {
    for (int64_t kv : {1, 2}) {
      Case c = gpu_case(2, 150, 4, dh, true);
      c.kv_heads = kv, c.dropout = 0.1f, c.total_heads = 8, c.head_offset = 4;
      add_documents(&c, 61 + dh);
      check_gpu(c, 62 + dh + kv);
      Case x = gpu_case(2, 70, 4, dh, false);
      x.kv_heads = kv, x.cross = true, x.tk = 133, x.kv_lengths = {133, 50};
      x.bias = AttentionBias::kAlibi;
      check_gpu(x, 63 + dh + kv);
    }
  }
}

// One small case per tile width with every per-block smem structure in use (relative-bucket
// band and diagonal sums, dropout, causal tiles, the split dk / dv kernels of 192 and 256):
// the case compute-sanitizer's racecheck runs.
TEST(FlashAttentionGpu, SmallBackwardEveryWidth) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {40, 80, 128, 168, 256}) {
    Case c = gpu_case(1, 70, 1, dh, true);
    c.scale = 1.0f, c.dropout = 0.1f;
    add_relative_buckets(&c, 40 + dh);
    check_gpu(c, 41 + dh);
  }
}

TEST(FlashAttentionGpu, RelativeBucketsForward) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 80}) {
    Case c = gpu_case(2, 150, 2, dh, false);
    c.cross = true, c.tk = 90, c.scale = 1.0f;
    add_relative_buckets(&c, 3);
    check_gpu(c, 15, /*backward=*/false);
  }
}

// T5's encoder (bidirectional, padded keys), decoder self-attention (causal, dropout) and
// cross-shaped cases, with heads split as under TP: d rel_table against the CPU twin. The
// T5 head sizes (64, 128) take every shape; the others the encoder and decoder ones.
TEST(FlashAttentionGpu, RelativeBucketsBackward) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : kHeadSizes) {
    Case enc = gpu_case(3, 200, 2, dh, false);
    enc.scale = 1.0f, enc.kv_lengths = {200, 130, 7}, enc.total_heads = 6, enc.head_offset = 2;
    add_relative_buckets(&enc, 21);
    check_gpu(enc, 22);
    Case dec = gpu_case(2, 130, 3, dh, true);
    dec.scale = 1.0f, dec.dropout = 0.1f;
    add_relative_buckets(&dec, 23);
    check_gpu(dec, 24);
    if (dh != 64 && dh != 128) continue;
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

// Dropout's mask is the CPU twin's, element for element. With v one-hot over keys (v[j] = e_j,
// Tk <= Dh), out[i][d] = P[i][d] keep[i][d] / (1 - p) is zero exactly where element (i, d) is
// dropped (the forward kernel's mask); with dout one-hot over queries (dout[i] = e_i, Tq <= Dh),
// dv[j][d] = P[d][j] keep[d][j] / (1 - p) (the dk/dv kernel's). Key counts that are a multiple
// of 4 (lanes share one Philox call per four elements) and not (one call per element), tile
// widths 64, 96, 128 and 256; p 0.5, heads offset as under TP. q, k in [-0.5, 0.5] keep every
// P above f16's smallest subnormal. The dk/dv kernel's mask is checked both drawn and read from
// the forward's saved bits (AttentionMasks::dropout_keep).
TEST(FlashAttentionGpu, DropoutMaskIsTheCpuTwins) {
  ANVIL_SKIP_WITHOUT_GPU();
  struct Shape {
    int64_t tq, tk, dh;
  };
  for (const Shape sh : {Shape{64, 64, 64}, Shape{40, 64, 64}, Shape{64, 60, 64}, Shape{62, 62, 64},
                         Shape{100, 128, 128}, Shape{96, 96, 96}, Shape{33, 44, 256}}) {
    Case c = gpu_case(2, sh.tq, 2, sh.dh, false);
    c.cross = true, c.tk = sh.tk, c.dropout = 0.5f, c.total_heads = 5, c.head_offset = 2;
    SCOPED_TRACE(::testing::Message() << "Tq=" << sh.tq << " Tk=" << sh.tk << " Dh=" << sh.dh);
    const int64_t hd = c.heads * c.dh;
    Inputs in;
    in.xq = round_both(testing::random_uniform(c.batch * c.tq * hd, 301 + sh.tk, -0.5f, 0.5f));
    in.xkv = round_both(testing::random_uniform(c.batch * c.tk * 2 * hd, 302, -0.5f, 0.5f));
    in.dout.assign(c.batch * c.tq * hd, 0.0f);
    for (int64_t r = 0; r < c.batch * c.tk; ++r) {  // v[b, j, h] = e_j
      for (int64_t h = 0; h < c.heads; ++h) {
        for (int64_t d = 0; d < c.dh; ++d) {
          in.xkv[r * 2 * hd + hd + h * c.dh + d] = d == r % c.tk ? 1.0f : 0.0f;
        }
      }
    }
    for (int64_t r = 0; r < c.batch * c.tq; ++r) {  // dout[b, i, h] = e_i
      for (int64_t h = 0; h < c.heads; ++h) in.dout[r * hd + h * c.dh + r % c.tq] = 1.0f;
    }
    const Results ref = run(c, Device::kCpu, DType::kF32, in);
    // The zero pattern of x's first `used` columns of each head, rows of `len` per sample.
    auto zeros = [&](const std::vector<double>& x, int64_t rows, int64_t used) {
      std::vector<bool> z;
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t h = 0; h < c.heads; ++h) {
          for (int64_t d = 0; d < used; ++d) z.push_back(x[(r * c.heads + h) * c.dh + d] == 0.0);
        }
      }
      return z;
    };
    const std::vector<bool> out_ref = zeros(ref.out, c.batch * c.tq, c.tk);
    const std::vector<bool> dv_ref = zeros(ref.dv, c.batch * c.tk, c.tq);
    const double dropped =
        std::count(out_ref.begin(), out_ref.end(), true) / double(out_ref.size());
    EXPECT_GT(dropped, 0.4);
    EXPECT_LT(dropped, 0.6);
    for (DType dt : kDtypes) {
      SCOPED_TRACE(engine::dtype_name(dt));
      const Results got = run(c, Device::kCuda, dt, in);
      const std::vector<bool> out_got = zeros(got.out, c.batch * c.tq, c.tk);
      const std::vector<bool> dv_got = zeros(got.dv, c.batch * c.tk, c.tq);
      int64_t out_diff = 0, dv_diff = 0;
      for (size_t e = 0; e < out_ref.size(); ++e) out_diff += out_got[e] != out_ref[e];
      for (size_t e = 0; e < dv_ref.size(); ++e) dv_diff += dv_got[e] != dv_ref[e];
      EXPECT_EQ(out_diff, 0) << "forward mask elements unlike the CPU twin's";
      EXPECT_EQ(dv_diff, 0) << "dk/dv kernel mask elements unlike the CPU twin's";
      Case saved = c;  // the dk/dv kernel reading the forward's saved bits
      saved.save_keep = true;
      const std::vector<bool> dv_saved =
          zeros(run(saved, Device::kCuda, dt, in).dv, c.batch * c.tk, c.tq);
      int64_t saved_diff = 0;
      for (size_t e = 0; e < dv_ref.size(); ++e) saved_diff += dv_saved[e] != dv_ref[e];
      EXPECT_EQ(saved_diff, 0) << "dk/dv kernel mask from the saved bits unlike the CPU twin's";
    }
  }
}

// Dropout on random data where the key count is a multiple of 4 (the shared Philox calls):
// few keys at p 0.5 (each dq row then hangs on a handful of mask elements), T5's encoder with
// relative buckets, its cross-attention shape, and causal grouped-query attention.
TEST(FlashAttentionGpu, DropoutSharedPhiloxCalls) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 128, 80}) {
    for (int64_t t : {8, 12}) {
      Case c = gpu_case(2, t, 2, dh, t == 12);
      c.dropout = 0.5f, c.total_heads = 4, c.head_offset = 1;
      check_gpu(c, 310 + t + dh);
    }
    Case enc = gpu_case(2, 200, 2, dh, false);
    enc.scale = 1.0f, enc.dropout = 0.1f, enc.kv_lengths = {200, 132};
    add_relative_buckets(&enc, 311);
    check_gpu(enc, 312 + dh);
    Case x = gpu_case(2, 114, 2, dh, false);
    x.cross = true, x.tk = 300, x.scale = 1.0f, x.dropout = 0.1f, x.kv_lengths = {300, 131};
    add_relative_buckets(&x, 313);
    check_gpu(x, 314 + dh);
    Case g = gpu_case(2, 256, 4, dh, true);
    g.kv_heads = 2, g.dropout = 0.1f;
    add_documents(&g, 315 + dh);
    check_gpu(g, 316 + dh);
  }
}

// Bidirectional prefixes: prefix-LM (one per sample: inside the first tile, across several
// tiles, none, the whole sample) and packed segments with input prefixes, head sizes 64, 128
// and 80 (width 96, zero-padded), lengths that are not tile multiples; ALiBi and dropout
// (BLOOM's prefix-LM). Prefixes past the diagonal make tiles above it visible: the forward and
// dq kernels must walk them and the dk/dv kernel must start before the diagonal.
TEST(FlashAttentionGpu, PrefixLmAndPackedSegmentPrefixes) {
  ANVIL_SKIP_WITHOUT_GPU();
  for (int64_t dh : {64, 128, 80}) {
    Case c = gpu_case(4, 333, 2, dh, true);
    add_sample_prefixes(&c, {40, 200, 0, 333});
    check_gpu(c, 70 + dh);
    c.dropout = 0.1f, c.bias = AttentionBias::kAlibi, c.total_heads = 4, c.head_offset = 1;
    check_gpu(c, 71 + dh);
    Case s = gpu_case(2, 517, 2, dh, true);
    add_documents(&s, 72 + dh);  // about one segment end in 40 tokens
    add_segment_prefixes(&s);
    check_gpu(s, 73 + dh);
    Case l = gpu_case(1, 1100, 1, dh, true);  // few long segments: prefixes over many tiles
    l.segs_q = l.segs_k = std::vector<int32_t>(1100, 0);
    for (int64_t t = 700; t < 1100; ++t) l.segs_q[t] = l.segs_k[t] = 1;
    add_segment_prefixes(&l);
    check_gpu(l, 74 + dh);
  }
}

// The Hopper forward (AttentionKernel::kWgmma: sm_90a wgmma + TMA, flash_attention_forward_
// sm90a.cu) only runs on compute capability 9.0; elsewhere its tests skip.
bool hopper() {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  return major == 9 && minor == 0;
}

#define ANVIL_SKIP_WITHOUT_HOPPER() \
  ANVIL_SKIP_WITHOUT_GPU();         \
  if (!hopper()) GTEST_SKIP() << "the wgmma forward needs a compute capability 9.0 GPU"

// bf16 out and lse of the wgmma forward against the f32 CPU twin (bounds of check_gpu's out),
// after asserting that the case does run the new kernel, so a silent fallback to mma.sync
// cannot pass for it.
void check_wgmma(Case c, uint64_t seed) {
  c.kernel = AttentionKernel::kWgmma;
  SCOPED_TRACE(::testing::Message()
               << "wgmma B=" << c.batch << " Tq=" << c.tq << " Tk=" << c.tk << " H=" << c.heads
               << " kv heads=" << c.kv_heads << " Dh=" << c.dh << " causal=" << c.causal
               << " documents=" << !c.segs_q.empty() << " padded=" << !c.kv_lengths.empty());
  const Inputs in = exact_inputs(c, seed);
  {
    testing::TensorPool pool(Device::kCuda);
    const Views w = make_views(pool, c, DType::kBF16, in.xq, in.xkv, in.dout);
    ASSERT_TRUE(cuda::flash_attention_forward_uses_wgmma(args_of(c), w.q, w.k, w.v, {}));
  }
  const Results ref = run(c, Device::kCpu, DType::kF32, in, /*backward=*/false);
  const Results got = run(c, Device::kCuda, DType::kBF16, in, /*backward=*/false);
  expect_near_scaled(got.out, ref.out, 2e-2, 2e-2, 2e-4, "out");
  expect_lse_near(got.lse, ref.lse);
}

// Lengths under one tile (1, 17), several tiles with a partial last one (1000, 2049: 16 and 17
// key tiles of 128), causal and bidirectional.
TEST(FlashAttentionGpu, WgmmaForwardLengthsCausalAndNot) {
  ANVIL_SKIP_WITHOUT_HOPPER();
  for (int64_t dh : {64, 128}) {
    for (bool causal : {true, false}) {
      for (int64_t t : {1, 17}) check_wgmma(gpu_case(2, t, 2, dh, causal), 200 + t + dh);
      check_wgmma(gpu_case(1, 1000, 1, dh, causal), 201 + dh);
      check_wgmma(gpu_case(1, 2049, 1, dh, causal), 202 + dh);
    }
  }
}

// Key padding (an empty sample: out 0, lse +inf), cross-attention lengths (fewer and more
// queries than keys), documents, grouped-query heads (kv heads 1 and 2 of 4).
TEST(FlashAttentionGpu, WgmmaForwardPaddingCrossDocumentsGroupedQuery) {
  ANVIL_SKIP_WITHOUT_HOPPER();
  for (int64_t dh : {64, 128}) {
    Case c = gpu_case(3, 130, 2, dh, false);
    c.kv_lengths = {130, 77, 1};
    check_wgmma(c, 210 + dh);
    Case x = gpu_case(2, 70, 2, dh, false);
    x.cross = true, x.tk = 133, x.kv_lengths = {133, 50}, x.scale = 1.0f;
    check_wgmma(x, 211 + dh);
    x.kv_lengths = {0, 64};
    check_wgmma(x, 212 + dh);
    Case y = gpu_case(2, 300, 2, dh, false);
    y.cross = true, y.tk = 114, y.kv_lengths = {114, 61};
    check_wgmma(y, 213 + dh);
    Case d = gpu_case(2, 300, 2, dh, true);
    add_documents(&d, 214 + dh);
    check_wgmma(d, 215 + dh);
    for (int64_t kv : {1, 2}) {
      Case g = gpu_case(2, 260, 4, dh, true);
      g.kv_heads = kv;
      add_documents(&g, 216 + dh);
      check_wgmma(g, 217 + dh + kv);
      Case gx = gpu_case(2, 70, 4, dh, false);
      gx.kv_heads = kv, gx.cross = true, gx.tk = 200, gx.kv_lengths = {200, 90};
      check_wgmma(gx, 219 + dh + kv);
    }
  }
}

// What the wgmma kernel does not take runs mma.sync (and stays correct).
TEST(FlashAttentionGpu, WgmmaFallsBackOutsideItsCases) {
  ANVIL_SKIP_WITHOUT_HOPPER();
  testing::TensorPool pool(Device::kCuda);
  for (int64_t dh : {80, 64}) {
    Case c = gpu_case(1, 40, 2, dh, true);
    c.kernel = AttentionKernel::kWgmma;
    if (dh == 64) c.bias = AttentionBias::kAlibi;
    const Inputs in = exact_inputs(c, 230 + dh);
    const Views w = make_views(pool, c, DType::kBF16, in.xq, in.xkv, in.dout);
    EXPECT_FALSE(cuda::flash_attention_forward_uses_wgmma(args_of(c), w.q, w.k, w.v, {})) << dh;
    check_gpu(c, 231 + dh, /*backward=*/false);
  }
  // Prefix-LM prefixes and packed MTF pairs are not in the wgmma kernel: with kWgmma asked they
  // must still match the CPU twin (a kernel that ignored prefix_end would not).
  for (int64_t dh : {64, 128}) {
    Case c = gpu_case(2, 300, 2, dh, true);
    c.kernel = AttentionKernel::kWgmma;
    add_sample_prefixes(&c, {130, 7});
    check_gpu(c, 232 + dh);
    Case s = gpu_case(1, 517, 2, dh, true);
    s.kernel = AttentionKernel::kWgmma;
    add_documents(&s, 233 + dh);
    add_segment_prefixes(&s);
    check_gpu(s, 234 + dh);
  }
}

}  // namespace
}  // namespace anvil::ops
