// CUDA twin of ops/attention.h: causal multi-head self-attention with an optional document mask,
// the correct baseline built from batched cuBLASLt GEMMs (ops::gemm) and warp-per-row softmax
// kernels. vis_ij = (j <= i || j < prefix_end[b*T + i]) && (no segments || seg[b*T + j] ==
// seg[b*T + i]) (prefix_end when given).
//   forward : q,k,v = split heads of qkv;  S = scale * q k^T (f32);  P = softmax of S over the
//             visible j (= probs);  P' = dropout(P);  out_h = P' v;  out = merge heads(out_h) (=)
//   backward: dv = P'^T dout_h;  dP' = dout_h v^T (f32);  dP = dropout_backward(dP');
//             dS = P (dP - rowsum(P dP)) * scale (0 where not visible);  dq = dS k;
//             dk = dS^T q;  dqkv = merge heads(dq | dk | dv)                                  (=)
// Dropout keeps element (b, h, i, j) when philox_uniform_at(seed, offset, e) >= p with the
// model-wide index e = ((b*TH + head_offset + h)*T + i)*T + j (TH = total_heads), and scales it
// by 1 / (1 - p) (ops/dropout semantics), so backward regenerates the mask instead of storing
// it. Masked entries are exactly 0 in P, P' and dS; the GEMMs still run over the full T x T
// square (a flash kernel replaces this).
//
// Workspace layout (each region starts 256-byte aligned; act = the dtype of qkv; BH = B*H):
//   q, k, v   3 x [BH, T, Dh] act   heads split out of qkv
//   oh          [BH, T, Dh] act     forward: out_h; backward: dout_h
//   dq, dk, dv 3 x [BH, T, Dh] act  backward only
//   scores      [BH, T, T]  f32     forward: S; backward: dP'
//   pbuf        [BH, T, T]  act     forward: P' (dropout only); backward: P' then dS
// attention_workspace_bytes() sizes act as 4 bytes so one number covers bf16 and f32.
#include <cuda_bf16.h>

#include <cstdint>
#include <string>
#include <type_traits>

#include "engine/cuda_check.h"
#include "engine/philox.h"
#include "engine/status.h"
#include "ops/attention.h"
#include "ops/cuda/vec_io.cuh"
#include "ops/gemm.h"

namespace anvil::ops::cuda {
namespace {

using engine::DType;

constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;  // warps (= rows) per softmax block
constexpr int kThreads = 256;     // elementwise kernels

__device__ __forceinline__ float warp_max(float v) {
  for (int o = kWarp / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// dst: [B, H, T, Dh] <- the H*Dh columns starting at col0 of src rows [B*T, src_ld].
template <typename Act>
__global__ void gather_heads_grid_stride(Act* dst, const Act* src, int64_t src_ld, int64_t col0,
                                         int64_t batch, int64_t seq, int64_t heads,
                                         int64_t head_dim) {
  const int64_t total = batch * heads * seq * head_dim;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = idx % head_dim;
    const int64_t t = (idx / head_dim) % seq;
    const int64_t bh = idx / (head_dim * seq);
    const int64_t h = bh % heads, b = bh / heads;
    dst[idx] = src[(b * seq + t) * src_ld + col0 + h * head_dim + d];
  }
}

// The inverse: the H*Dh columns starting at col0 of dst rows [B*T, dst_ld] <- src [B, H, T, Dh].
template <typename Act>
__global__ void scatter_heads_grid_stride(Act* dst, int64_t dst_ld, int64_t col0, const Act* src,
                                          int64_t batch, int64_t seq, int64_t heads,
                                          int64_t head_dim) {
  const int64_t total = batch * heads * seq * head_dim;
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t d = idx % head_dim;
    const int64_t t = (idx / head_dim) % seq;
    const int64_t bh = idx / (head_dim * seq);
    const int64_t h = bh % heads, b = bh / heads;
    dst[(b * seq + t) * dst_ld + col0 + h * head_dim + d] = src[idx];
  }
}

// Where row r = bh*T + i of the [BH*T, T] probabilities sits: its query i, its sample's document
// ids, and its first element in the model-wide [B, TH, T, T] dropout numbering.
struct RowMap {
  const int32_t* seg;     // [B*T] document ids; null: plain causal
  const int32_t* prefix;  // [B*T] prefix ends; null: none
  int64_t seq, heads, total_heads, head_offset;
  uint64_t seed, offset;
  float p, keep_scale;
};

struct Row {
  int64_t i;
  const int32_t* seg;  // the sample's ids (seg + b*T), or null
  int32_t seg_i;
  int64_t prefix_i;  // keys before it are visible too (0: none)
  int64_t end;       // keys >= end are not visible: max(i + 1, min(prefix_i, T))
  uint64_t drop0;    // dropout index of (b, h, i, 0)

  // Key j is visible to query i: causal or in the prefix, and the same document when segments
  // are given.
  __device__ __forceinline__ bool visible(int64_t j) const {
    return (j <= i || j < prefix_i) && (seg == nullptr || seg[j] == seg_i);
  }
};

// Model-wide dropout index of local element idx of [B, H, T, T], sample b:
//   ((b*TH + head_offset + h)*T + i)*T + j = idx + (b*(TH - H) + head_offset)*T*T.
__device__ __forceinline__ uint64_t drop_index(const RowMap& m, int64_t idx, int64_t b) {
  return static_cast<uint64_t>(idx +
                               (b * (m.total_heads - m.heads) + m.head_offset) * m.seq * m.seq);
}

__device__ __forceinline__ Row row_of(const RowMap& m, int64_t row) {
  const int64_t i = row % m.seq, b = row / (m.heads * m.seq);
  Row r;
  r.i = i;
  r.seg = m.seg == nullptr ? nullptr : m.seg + b * m.seq;
  r.seg_i = r.seg == nullptr ? 0 : r.seg[i];
  r.prefix_i = m.prefix == nullptr ? 0 : m.prefix[b * m.seq + i];
  r.end = r.prefix_i > i + 1 ? (r.prefix_i < m.seq ? r.prefix_i : m.seq) : i + 1;
  r.drop0 = drop_index(m, row * m.seq, b);
  return r;
}

// keep ? x * keep_scale : 0 for model-wide dropout element e (x when p == 0).
__device__ __forceinline__ float drop_at(const RowMap& m, float x, uint64_t e) {
  if (m.p == 0.0f) return x;
  return engine::philox_uniform_at(m.seed, m.offset, e) >= m.p ? x * m.keep_scale : 0.0f;
}

// One warp per row r of [BH*T, T] (query position i = r % T):
//   probs[r, j] = exp(s_j - max) / sum over visible j, 0 elsewhere        (=)
//   dropped[r, j] = keep ? probs[r, j] * keep_scale : 0 (when dropped != null; from the stored,
//   rounded probability, exactly what ops/dropout would produce from probs)
template <typename Act>
__global__ void masked_softmax_warp_per_row(Act* probs, Act* dropped, const float* scores,
                                            int64_t rows, RowMap m) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;  // whole warps leave together: the shuffles below stay full-mask
  const int64_t seq = m.seq;
  const Row r = row_of(m, row);
  const float* s = scores + row * seq;
  float mx = -INFINITY;
  for (int64_t j = lane; j < r.end; j += kWarp) {
    if (r.visible(j)) mx = fmaxf(mx, s[j]);
  }
  mx = warp_max(mx);  // finite: the diagonal is always visible
  float sum = 0.0f;
  for (int64_t j = lane; j < r.end; j += kWarp) {
    if (r.visible(j)) sum += expf(s[j] - mx);
  }
  const float inv = 1.0f / warp_sum(sum);
  for (int64_t j = lane; j < seq; j += kWarp) {
    const int64_t idx = row * seq + j;
    const Act pj = from_f32<Act>(r.visible(j) ? expf(s[j] - mx) * inv : 0.0f);
    probs[idx] = pj;
    if (dropped != nullptr) {
      dropped[idx] = from_f32<Act>(drop_at(m, to_f32(pj), r.drop0 + j));
    }
  }
}

// dropped = keep ? probs * keep_scale : 0 over the flat [BH, T, T] (backward's P').
template <typename Act>
__global__ void dropout_probs_grid_stride(Act* dropped, const Act* probs, int64_t total, RowMap m) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t b = idx / (m.heads * m.seq * m.seq);
    dropped[idx] = from_f32<Act>(drop_at(m, to_f32(probs[idx]), drop_index(m, idx, b)));
  }
}

// One warp per row r (query i = r % T), with dP = dropout_backward(dP'):
//   dscores[r, j] = P_j (dP_j - sum_l P_l dP_l) * scale over visible j, 0 elsewhere   (=)
template <typename Act>
__global__ void masked_softmax_backward_warp_per_row(Act* dscores, const float* dprobs,
                                                     const Act* probs, int64_t rows, float scale,
                                                     RowMap m) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int64_t seq = m.seq;
  const Row r = row_of(m, row);
  const float* dpr = dprobs + row * seq;
  const Act* pr = probs + row * seq;
  float acc = 0.0f;
  for (int64_t j = lane; j < r.end; j += kWarp) {
    if (r.visible(j)) acc += to_f32(pr[j]) * drop_at(m, dpr[j], r.drop0 + j);
  }
  acc = warp_sum(acc);
  for (int64_t j = lane; j < seq; j += kWarp) {
    const float ds =
        r.visible(j) ? to_f32(pr[j]) * (drop_at(m, dpr[j], r.drop0 + j) - acc) * scale : 0.0f;
    dscores[row * seq + j] = from_f32<Act>(ds);
  }
}

RowMap row_map(const AttentionArgs& a, ConstTensorView segments) {
  RowMap m;
  m.seg = segments.empty() ? nullptr : segments.as<int32_t>();
  m.prefix = a.prefix_end.empty() ? nullptr : a.prefix_end.as<int32_t>();
  m.seq = a.seq;
  m.heads = a.heads;
  m.total_heads = a.total_heads == 0 ? a.heads : a.total_heads;
  m.head_offset = a.head_offset;
  m.seed = a.seed;
  m.offset = a.offset;
  m.p = a.dropout_p;
  m.keep_scale = 1.0f / (1.0f - a.dropout_p);
  return m;
}

int grid_for(int64_t total) {
  const int64_t blocks = (total + kThreads - 1) / kThreads;
  return static_cast<int>(blocks < 65536 ? blocks : 65536);  // grid-stride loops cover the rest
}

int softmax_grid(int64_t rows) {
  return static_cast<int>((rows + kRowsPerBlock - 1) / kRowsPerBlock);
}

constexpr size_t kAlign = 256;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

enum Region { kQ, kK, kV, kOh, kDq, kDk, kDv, kScores, kPbuf, kNumRegions };

// Byte offsets of the workspace regions (see the layout at the top of the file).
struct Scratch {
  size_t offset[kNumRegions];
  size_t total;
};

Scratch plan_scratch(const AttentionArgs& a, size_t act_bytes) {
  const size_t n_hd = static_cast<size_t>(a.batch * a.heads * a.seq * a.head_dim);
  const size_t n_tt = static_cast<size_t>(a.batch * a.heads * a.seq * a.seq);
  const size_t bytes[kNumRegions] = {n_hd * act_bytes, n_hd * act_bytes,     n_hd * act_bytes,
                                     n_hd * act_bytes, n_hd * act_bytes,     n_hd * act_bytes,
                                     n_hd * act_bytes, n_tt * sizeof(float), n_tt * act_bytes};
  Scratch s{};
  size_t at = 0;
  for (int r = 0; r < kNumRegions; ++r) {
    s.offset[r] = at;
    at += align_up(bytes[r]);
  }
  s.total = at;
  return s;
}

// Typed pointers into the caller's workspace.
template <typename Act>
struct Buffers {
  Act *q, *k, *v, *oh, *dq, *dk, *dv, *pbuf;
  float* scores;
  Buffers(const AttentionArgs& args, Workspace ws) {
    const Scratch s = plan_scratch(args, sizeof(Act));
    char* base = static_cast<char*>(ws.data);
    auto act = [&](Region r) { return reinterpret_cast<Act*>(base + s.offset[r]); };
    q = act(kQ);
    k = act(kK);
    v = act(kV);
    oh = act(kOh);
    dq = act(kDq);
    dk = act(kDk);
    dv = act(kDv);
    pbuf = act(kPbuf);
    scores = reinterpret_cast<float*>(base + s.offset[kScores]);
  }
};

// [BH, rows, cols] views for the batched GEMMs: outputs and inputs.
TensorView out_view(void* p, DType dtype, int64_t bh, int64_t rows, int64_t cols) {
  return engine::make_view(p, dtype, engine::Device::kCuda, {bh, rows, cols});
}
ConstTensorView in_view(const void* p, DType dtype, int64_t bh, int64_t rows, int64_t cols) {
  return engine::make_view(p, dtype, engine::Device::kCuda, {bh, rows, cols});
}

template <typename Act>
void gather(Act* dst, const Act* src, int64_t src_ld, int64_t col0, const AttentionArgs& a,
            cudaStream_t s) {
  const int64_t total = a.batch * a.heads * a.seq * a.head_dim;
  gather_heads_grid_stride<Act><<<grid_for(total), kThreads, 0, s>>>(
      dst, src, src_ld, col0, a.batch, a.seq, a.heads, a.head_dim);
  ANVIL_CUDA_LAUNCH_CHECK();
}

template <typename Act>
void scatter(Act* dst, int64_t dst_ld, int64_t col0, const Act* src, const AttentionArgs& a,
             cudaStream_t s) {
  const int64_t total = a.batch * a.heads * a.seq * a.head_dim;
  scatter_heads_grid_stride<Act><<<grid_for(total), kThreads, 0, s>>>(
      dst, dst_ld, col0, src, a.batch, a.seq, a.heads, a.head_dim);
  ANVIL_CUDA_LAUNCH_CHECK();
}

template <typename Act>
void forward_typed(const AttentionArgs& a, TensorView out, TensorView probs, ConstTensorView qkv,
                   ConstTensorView segments, Workspace ws, Stream& stream) {
  const DType act = qkv.dtype;
  const cudaStream_t s = stream.cuda_stream();
  const int64_t T = a.seq, Dh = a.head_dim, BH = a.batch * a.heads, hd = a.heads * Dh;
  const Buffers<Act> buf(a, ws);
  const Act* qkv_p = qkv.as<Act>();
  gather(buf.q, qkv_p, 3 * hd, 0, a, s);
  gather(buf.k, qkv_p, 3 * hd, hd, a, s);
  gather(buf.v, qkv_p, 3 * hd, 2 * hd, a, s);

  // S = scale * q k^T: [BH, T, T] f32 (k stored [T, Dh] = [n, k] -> trans_b).
  GemmArgs qk{T, T, Dh};
  qk.trans_b = true;
  qk.alpha = a.scale;
  qk.batch = BH;
  ops::gemm(qk, out_view(buf.scores, DType::kF32, BH, T, T), in_view(buf.q, act, BH, T, Dh),
            in_view(buf.k, act, BH, T, Dh), ConstTensorView{}, TensorView{}, stream);

  const bool drop = a.dropout_p > 0.0f;
  const int64_t rows = BH * T;
  masked_softmax_warp_per_row<Act><<<softmax_grid(rows), kRowsPerBlock * kWarp, 0, s>>>(
      probs.as<Act>(), drop ? buf.pbuf : nullptr, buf.scores, rows, row_map(a, segments));
  ANVIL_CUDA_LAUNCH_CHECK();

  // out_h = P' v: [BH, T, Dh] (v stored [T, Dh] = [k, n]).
  Act* p_used = drop ? buf.pbuf : probs.as<Act>();
  GemmArgs pv{T, Dh, T};
  pv.batch = BH;
  ops::gemm(pv, out_view(buf.oh, act, BH, T, Dh), in_view(p_used, act, BH, T, T),
            in_view(buf.v, act, BH, T, Dh), ConstTensorView{}, TensorView{}, stream);
  scatter(out.as<Act>(), hd, 0, buf.oh, a, s);
}

template <typename Act>
void backward_typed(const AttentionArgs& a, TensorView dqkv, ConstTensorView dout,
                    ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                    Workspace ws, Stream& stream) {
  const DType act = qkv.dtype;
  const cudaStream_t s = stream.cuda_stream();
  const int64_t T = a.seq, Dh = a.head_dim, BH = a.batch * a.heads, hd = a.heads * Dh;
  const Buffers<Act> buf(a, ws);
  const Act* qkv_p = qkv.as<Act>();
  gather(buf.q, qkv_p, 3 * hd, 0, a, s);
  gather(buf.k, qkv_p, 3 * hd, hd, a, s);
  gather(buf.v, qkv_p, 3 * hd, 2 * hd, a, s);
  gather(buf.oh, dout.as<Act>(), hd, 0, a, s);  // dout_h

  // P' = dropout(P), regenerated from Philox.
  const bool drop = a.dropout_p > 0.0f;
  const RowMap map = row_map(a, segments);
  const Act* p_used = probs.as<Act>();
  if (drop) {
    const int64_t total = BH * T * T;
    dropout_probs_grid_stride<Act>
        <<<grid_for(total), kThreads, 0, s>>>(buf.pbuf, probs.as<Act>(), total, map);
    ANVIL_CUDA_LAUNCH_CHECK();
    p_used = buf.pbuf;
  }

  // dv = P'^T dout_h: [BH, T, Dh] (P' stored [i, j] = [k, m] -> trans_a).
  GemmArgs gdv{T, Dh, T};
  gdv.trans_a = true;
  gdv.batch = BH;
  ops::gemm(gdv, out_view(buf.dv, act, BH, T, Dh), in_view(p_used, act, BH, T, T),
            in_view(buf.oh, act, BH, T, Dh), ConstTensorView{}, TensorView{}, stream);

  // dP' = dout_h v^T: [BH, T, T] f32 (v stored [j, Dh] = [n, k] -> trans_b).
  GemmArgs gdp{T, T, Dh};
  gdp.trans_b = true;
  gdp.batch = BH;
  ops::gemm(gdp, out_view(buf.scores, DType::kF32, BH, T, T), in_view(buf.oh, act, BH, T, Dh),
            in_view(buf.v, act, BH, T, Dh), ConstTensorView{}, TensorView{}, stream);

  // dS into pbuf (P' is no longer needed: the dv GEMM before it on the stream has read it).
  const int64_t rows = BH * T;
  masked_softmax_backward_warp_per_row<Act><<<softmax_grid(rows), kRowsPerBlock * kWarp, 0, s>>>(
      buf.pbuf, buf.scores, probs.as<Act>(), rows, a.scale, map);
  ANVIL_CUDA_LAUNCH_CHECK();

  // dq = dS k (k stored [j, Dh] = [k, n]); dk = dS^T q (dS stored [i, j] = [k, m] -> trans_a).
  GemmArgs gdq{T, Dh, T};
  gdq.batch = BH;
  ops::gemm(gdq, out_view(buf.dq, act, BH, T, Dh), in_view(buf.pbuf, act, BH, T, T),
            in_view(buf.k, act, BH, T, Dh), ConstTensorView{}, TensorView{}, stream);
  GemmArgs gdk{T, Dh, T};
  gdk.trans_a = true;
  gdk.batch = BH;
  ops::gemm(gdk, out_view(buf.dk, act, BH, T, Dh), in_view(buf.pbuf, act, BH, T, T),
            in_view(buf.q, act, BH, T, Dh), ConstTensorView{}, TensorView{}, stream);

  Act* dst = dqkv.as<Act>();
  scatter(dst, 3 * hd, 0, buf.dq, a, s);
  scatter(dst, 3 * hd, hd, buf.dk, a, s);
  scatter(dst, 3 * hd, 2 * hd, buf.dv, a, s);
}

}  // namespace

size_t attention_workspace_bytes(const AttentionArgs& args, size_t act_bytes) {
  return plan_scratch(args, act_bytes).total;
}

void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, ConstTensorView segments, Workspace ws,
                       Stream& stream) {
  dispatch_act<true>(qkv.dtype, "cuda::attention_forward", [&](auto tag) {
    forward_typed<std::remove_pointer_t<decltype(tag)>>(args, out, probs, qkv, segments, ws,
                                                        stream);
  });
}

void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                        Workspace ws, Stream& stream) {
  dispatch_act<true>(qkv.dtype, "cuda::attention_backward", [&](auto tag) {
    backward_typed<std::remove_pointer_t<decltype(tag)>>(args, dqkv, dout, qkv, probs, segments, ws,
                                                         stream);
  });
}

}  // namespace anvil::ops::cuda
