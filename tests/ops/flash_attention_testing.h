// Test problems of the flash attention op (ops/flash_attention.h) shared by
// tests/ops/flash_attention_test.cc (the CPU twin) and flash_attention_gpu_test.cc (the CUDA
// kernels against it): a Case (shapes, options, masks as host data), its views laid out as the
// models lay them out (column views of a fused qkv, or separate q and kv buffers), random
// inputs, and one forward(+backward) run read back to host doubles.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "engine/tensor.h"
#include "ops/flash_attention.h"
#include "ops/flash_attention_detail.h"
#include "tests/testing/tensor_testing.h"

namespace anvil::ops::flash_testing {

using engine::Device;
using engine::DType;
using engine::slice_cols;
using testing::TensorPool;
using testing::TestStream;

// One test problem: shapes, options and masks as host data.
struct Case {
  int64_t batch = 2, tq = 9, tk = 9, heads = 2, dh = 4;
  bool causal = true, cross = false;  // cross: q and kv in separate buffers
  AttentionBias bias = AttentionBias::kNone;
  float scale = 0.5f, dropout = 0.0f;
  int64_t total_heads = 0, head_offset = 0;
  int64_t kv_heads = 0;  // heads of k and v (0: heads): grouped-query attention
  AttentionKernel kernel = AttentionKernel::kMmaSync;  // CUDA forward kernel
  bool save_keep = false;  // pass masks.dropout_keep (poisoned): forward saves, backward reads
  std::vector<int32_t> segs_q, segs_k, kv_lengths, rel_buckets;
  std::vector<int32_t> prefix_end;  // [B*Tq] bidirectional prefix ends (causal), or empty
  std::vector<float> rel_table;     // [buckets, total heads]
};

inline FlashAttentionArgs args_of(const Case& c) {
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
  a.kv_heads = c.kv_heads;
  a.kernel = c.kernel;
  return a;
}

inline int64_t kv_heads_of(const Case& c) { return c.kv_heads == 0 ? c.heads : c.kv_heads; }

inline int64_t model_heads(const Case& c) { return c.total_heads == 0 ? c.heads : c.total_heads; }

// Prefix-LM: one prefix length per sample, on every query of the sample.
inline void add_sample_prefixes(Case* c, const std::vector<int32_t>& lengths) {
  for (int64_t b = 0; b < c->batch; ++b) {
    for (int64_t i = 0; i < c->tq; ++i) c->prefix_end.push_back(lengths[b]);
  }
}

// Packed input/target pairs (T0/MTF): given the segment ids, each token of a segment gets the
// segment's first position plus input_len(segment) = (its length + 1) / 2 (rounded, at least 1),
// so each segment's first half is bidirectional.
inline void add_segment_prefixes(Case* c) {
  for (int64_t b = 0; b < c->batch; ++b) {
    int64_t start = 0;
    for (int64_t i = 0; i <= c->tq; ++i) {
      if (i < c->tq && c->segs_q[b * c->tq + i] == c->segs_q[b * c->tq + start]) continue;
      const int32_t end = static_cast<int32_t>(start + (i - start + 1) / 2);
      for (int64_t t = start; t < i; ++t) c->prefix_end.push_back(end);
      start = i;
    }
  }
}

// Relative buckets like T5's (bidirectional, 8 buckets, exact up to 2, log-spaced to 16).
inline void add_relative_buckets(Case* c, uint64_t seed) {
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

inline Views make_views(TensorPool& pool, const Case& c, DType dt, const std::vector<float>& xq,
                        const std::vector<float>& xkv, const std::vector<float>& xdout) {
  Views w;
  const int64_t hd = c.heads * c.dh, kd = kv_heads_of(c) * c.dh;
  if (!c.cross) {  // q | k | v columns
    TensorView qkv = pool.from(xq, dt, {c.batch * c.tq, hd + 2 * kd});
    TensorView dqkv = pool.empty(dt, {c.batch * c.tq, hd + 2 * kd});
    w.q = slice_cols(qkv, 0, hd);
    w.k = slice_cols(qkv, hd, hd + kd);
    w.v = slice_cols(qkv, hd + kd, hd + 2 * kd);
    w.dq = slice_cols(dqkv, 0, hd);
    w.dk = slice_cols(dqkv, hd, hd + kd);
    w.dv = slice_cols(dqkv, hd + kd, hd + 2 * kd);
    w.dq_buf = w.dkv_buf = dqkv;
  } else {
    w.q = pool.from(xq, dt, {c.batch * c.tq, hd});
    TensorView kv = pool.from(xkv, dt, {c.batch * c.tk, 2 * kd});
    TensorView dkv = pool.empty(dt, {c.batch * c.tk, 2 * kd});
    w.k = slice_cols(kv, 0, kd);
    w.v = slice_cols(kv, kd, 2 * kd);
    w.dq = pool.empty(dt, {c.batch * c.tq, hd});
    w.dk = slice_cols(dkv, 0, kd);
    w.dv = slice_cols(dkv, kd, 2 * kd);
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
  if (!c.prefix_end.empty()) w.masks.prefix_end = pool.from_i32(c.prefix_end, {c.batch * c.tq});
  if (c.bias == AttentionBias::kRelativeBuckets) {
    const int64_t nb = static_cast<int64_t>(c.rel_table.size()) / model_heads(c);
    w.masks.rel_buckets =
        pool.from_i32(c.rel_buckets, {static_cast<int64_t>(c.rel_buckets.size())});
    w.masks.rel_table = pool.from(c.rel_table, DType::kF32, {nb, model_heads(c)});
    w.d_table =
        pool.from(std::vector<float>(c.rel_table.size(), 0.25f), DType::kF32, {nb, model_heads(c)});
  }
  if (c.save_keep) {
    w.masks.dropout_keep = pool.empty(DType::kI32, {flash_attention_keep_words(args_of(c))});
  }
  return w;
}

struct Inputs {
  std::vector<float> xq, xkv, dout;
};

inline Inputs random_inputs(const Case& c, uint64_t seed, float range = 1.5f) {
  const int64_t hd = c.heads * c.dh, kd = kv_heads_of(c) * c.dh;
  Inputs in;
  in.xq =
      testing::random_uniform(c.batch * c.tq * (c.cross ? hd : hd + 2 * kd), seed, -range, range);
  if (c.cross) in.xkv = testing::random_uniform(c.batch * c.tk * 2 * kd, seed + 1, -range, range);
  in.dout = testing::random_uniform(c.batch * c.tq * hd, seed + 2);
  return in;
}

struct Results {
  std::vector<double> out, lse, dq, dk, dv, d_table;
  std::vector<int32_t> keep;  // the saved dropout mask words (save_keep)
};

// Elements (b, h, i, j) of c that are visible, as ops/flash_attention.h defines them.
template <typename F>
void for_each_visible(const Case& c, F f) {
  auto ptr = [](const std::vector<int32_t>& v) { return v.empty() ? nullptr : v.data(); };
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads; ++h) {
      for (int64_t i = 0; i < c.tq; ++i) {
        for (int64_t j = 0; j < c.tk; ++j) {
          if (detail::visible(c.causal, i, j, b, c.tq, c.tk, ptr(c.segs_q), ptr(c.segs_k),
                              ptr(c.kv_lengths), ptr(c.prefix_end))) {
            f(b, h, i, j);
          }
        }
      }
    }
  }
}

// Keep bit (b, h, i, j) of saved mask words (layout: ops/flash_attention_detail.h).
inline bool keep_bit_of(const Case& c, const std::vector<int32_t>& words, int64_t b, int64_t h,
                        int64_t i, int64_t j) {
  const uint32_t w = static_cast<uint32_t>(
      words[static_cast<size_t>(detail::keep_word(b, h, c.heads, i, j, c.tq, c.tk))]);
  return (w >> detail::keep_bit(i, j)) & 1u;
}

// The [rows, cols] column block `part` of a row-major host copy of `buf` (ld columns).
inline std::vector<double> columns(const std::vector<double>& host, int64_t ld,
                                   const TensorView& part, const TensorView& buf) {
  const int64_t col0 = (static_cast<const char*>(part.data) - static_cast<const char*>(buf.data)) /
                       static_cast<int64_t>(engine::dtype_size(buf.dtype));
  std::vector<double> out;
  for (int64_t r = 0; r < part.dim(0); ++r) {
    for (int64_t c = 0; c < part.dim(1); ++c) out.push_back(host[r * ld + col0 + c]);
  }
  return out;
}

inline Results run(const Case& c, Device device, DType dt, const Inputs& in, bool backward = true) {
  TestStream stream(device);
  TensorPool pool(device);
  Views w = make_views(pool, c, dt, in.xq, in.xkv, in.dout);
  const FlashAttentionArgs a = args_of(c);
  flash_attention_forward(a, w.out, w.lse, w.q, w.k, w.v, w.masks, stream);
  Results r;
  r.out = testing::to_host_f64(w.out);
  r.lse = testing::to_host_f64(w.lse);
  if (c.save_keep) r.keep = testing::to_host_i32(w.masks.dropout_keep);
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

}  // namespace anvil::ops::flash_testing
