// CPU twin of ops/attention.h, the reference: plain loops over (batch, head, query row).
//   vis_ij = (j <= i || j < prefix_end_i) && (no segments || seg_j == seg_i)   (the sample's
//   document ids; prefix_end when given)
//   s_ij = scale * q_i . k_j for visible j (P_ij = 0 exactly where not visible)
//   P_ij = softmax over visible j of s_ij                                   (= probs)
//   P'_ij = keep_ij ? P_ij / (1 - p) : 0,  keep_ij = philox(seed, offset, e) >= p with
//   e = ((b*TH + head_offset + h)*T + i)*T + j (the model-wide element index)
//   out_i = sum_j P'_ij v_j, heads concatenated                             (= out)
// Backward (= dqkv), with dP'_ij = dout_i . v_j and dP_ij = keep_ij ? dP'_ij / (1 - p) : 0:
//   dv_j = sum_i P'_ij dout_i
//   dS_ij = P_ij (dP_ij - sum_l P_il dP_il) * scale
//   dq_i = sum_j dS_ij k_j,  dk_j = sum_i dS_ij q_i
// f32 and f64 (finite differences in double). No scratch: dP' is recomputed where needed.
#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "engine/philox.h"
#include "engine/status.h"

namespace anvil::ops::cpu {
namespace {

using engine::DType;

// The inverted-dropout factor for model-wide element `index` of [B, TH, T, T], as ops/dropout
// computes it.
template <typename T>
struct ProbDropout {
  float p;
  uint64_t seed, offset;
  T keep_scale;
  explicit ProbDropout(const AttentionArgs& args)
      : p(args.dropout_p),
        seed(args.seed),
        offset(args.offset),
        keep_scale(static_cast<T>(1) / (static_cast<T>(1) - static_cast<T>(args.dropout_p))) {}
  T apply(T x, uint64_t index) const {
    if (p == 0.0f) return x;
    return engine::philox_uniform_at(seed, offset, index) >= p ? x * keep_scale : static_cast<T>(0);
  }
};

// Dimensions and row pointers of the packed layouts.
struct Layout {
  int64_t B, T, H, Dh, hd, ld;  // hd = H*Dh (out row), ld = 3*H*Dh (qkv row)
  int64_t TH, h0;               // model heads and this call's first one (dropout numbering)
  explicit Layout(const AttentionArgs& a)
      : B(a.batch),
        T(a.seq),
        H(a.heads),
        Dh(a.head_dim),
        hd(a.heads * a.head_dim),
        ld(3 * a.heads * a.head_dim),
        TH(a.total_heads == 0 ? a.heads : a.total_heads),
        h0(a.head_offset) {}
  // Offset of head h of part s (0: q, 1: k, 2: v) of token t of batch b in qkv.
  int64_t qkv(int64_t b, int64_t t, int s, int64_t h) const {
    return (b * T + t) * ld + s * hd + h * Dh;
  }
  int64_t out(int64_t b, int64_t t, int64_t h) const { return (b * T + t) * hd + h * Dh; }
  int64_t prob_row(int64_t b, int64_t h, int64_t i) const { return ((b * H + h) * T + i) * T; }
  // Dropout element index of (b, h, i, 0) in the model-wide [B, TH, T, T].
  uint64_t drop_row(int64_t b, int64_t h, int64_t i) const {
    return static_cast<uint64_t>(((b * TH + h0 + h) * T + i) * T);
  }
};

// Key visibility: causal (widened by the prefix when prefix_end: [B*T] is given), and within
// one document when segments (seg: [B*T]) are given.
struct Mask {
  const int32_t* seg;     // null: plain causal
  const int32_t* prefix;  // null: no prefix
  int64_t T;
  bool visible(int64_t b, int64_t i, int64_t j) const {
    return (j <= i || (prefix != nullptr && j < prefix[b * T + i])) &&
           (seg == nullptr || seg[b * T + j] == seg[b * T + i]);
  }
};

template <typename T>
T dot(const T* x, const T* y, int64_t n) {
  T s = 0;
  for (int64_t d = 0; d < n; ++d) s += x[d] * y[d];
  return s;
}

template <typename T>
void forward_typed(const AttentionArgs& args, T* out, T* probs, const T* qkv, const Mask& m) {
  const Layout L(args);
  const ProbDropout<T> drop(args);
  const T scale = static_cast<T>(args.scale);
  for (int64_t b = 0; b < L.B; ++b) {
    for (int64_t h = 0; h < L.H; ++h) {
      for (int64_t i = 0; i < L.T; ++i) {
        T* row = probs + L.prob_row(b, h, i);
        const T* qi = qkv + L.qkv(b, i, 0, h);
        // Scores into the probs row, then an in-place max-subtracted softmax over the visible
        // j (the diagonal always is, so mx is finite and sum >= 1); 0 elsewhere.
        T mx = -std::numeric_limits<T>::infinity();
        for (int64_t j = 0; j < L.T; ++j) {
          row[j] = m.visible(b, i, j) ? scale * dot(qi, qkv + L.qkv(b, j, 1, h), L.Dh)
                                      : -std::numeric_limits<T>::infinity();
          mx = std::max(mx, row[j]);
        }
        T sum = 0;
        for (int64_t j = 0; j < L.T; ++j) {
          row[j] = m.visible(b, i, j) ? std::exp(row[j] - mx) : static_cast<T>(0);
          sum += row[j];
        }
        for (int64_t j = 0; j < L.T; ++j) row[j] /= sum;
        // out_i = sum_j P'_ij v_j over the visible j.
        T* oi = out + L.out(b, i, h);
        for (int64_t d = 0; d < L.Dh; ++d) oi[d] = 0;
        for (int64_t j = 0; j < L.T; ++j) {
          if (!m.visible(b, i, j)) continue;
          const T pd = drop.apply(row[j], L.drop_row(b, h, i) + j);
          const T* vj = qkv + L.qkv(b, j, 2, h);
          for (int64_t d = 0; d < L.Dh; ++d) oi[d] += pd * vj[d];
        }
      }
    }
  }
}

template <typename T>
void backward_typed(const AttentionArgs& args, T* dqkv, const T* dout, const T* qkv, const T* probs,
                    const Mask& m) {
  const Layout L(args);
  const ProbDropout<T> drop(args);
  const T scale = static_cast<T>(args.scale);
  std::memset(static_cast<void*>(dqkv), 0, sizeof(T) * L.B * L.T * L.ld);
  for (int64_t b = 0; b < L.B; ++b) {
    for (int64_t h = 0; h < L.H; ++h) {
      for (int64_t i = 0; i < L.T; ++i) {
        const T* row = probs + L.prob_row(b, h, i);
        const uint64_t r = L.drop_row(b, h, i);
        const T* doi = dout + L.out(b, i, h);
        const T* qi = qkv + L.qkv(b, i, 0, h);
        // dP_ij through the dropout backward (same mask and factor as forward).
        auto dp = [&](int64_t j) {
          return drop.apply(dot(doi, qkv + L.qkv(b, j, 2, h), L.Dh), r + j);
        };
        // Masked j have P_ij = 0 and no gradient: skipped in both sums.
        T rowdot = 0;
        for (int64_t j = 0; j < L.T; ++j) {
          if (m.visible(b, i, j)) rowdot += row[j] * dp(j);
        }
        T* dqi = dqkv + L.qkv(b, i, 0, h);
        for (int64_t j = 0; j < L.T; ++j) {
          if (!m.visible(b, i, j)) continue;
          const T pd = drop.apply(row[j], r + j);
          T* dvj = dqkv + L.qkv(b, j, 2, h);
          for (int64_t d = 0; d < L.Dh; ++d) dvj[d] += pd * doi[d];
          const T ds = row[j] * (dp(j) - rowdot) * scale;
          const T* kj = qkv + L.qkv(b, j, 1, h);
          T* dkj = dqkv + L.qkv(b, j, 1, h);
          for (int64_t d = 0; d < L.Dh; ++d) {
            dqi[d] += ds * kj[d];
            dkj[d] += ds * qi[d];
          }
        }
      }
    }
  }
}

Mask mask_of(const AttentionArgs& args, ConstTensorView segments) {
  return Mask{segments.empty() ? nullptr : segments.as<int32_t>(),
              args.prefix_end.empty() ? nullptr : args.prefix_end.as<int32_t>(), args.seq};
}

}  // namespace

void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, ConstTensorView segments, Workspace /*ws*/,
                       Stream& /*stream*/) {
  const Mask m = mask_of(args, segments);
  switch (qkv.dtype) {
    case DType::kF32:
      forward_typed<float>(args, out.as<float>(), probs.as<float>(), qkv.as<float>(), m);
      break;
    case DType::kF64:
      forward_typed<double>(args, out.as<double>(), probs.as<double>(), qkv.as<double>(), m);
      break;
    default:
      ANVIL_CHECK_MSG(false,
                      "cpu::attention_forward: qkv must be f32/f64, got " + engine::describe(qkv));
  }
}

void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                        Workspace /*ws*/, Stream& /*stream*/) {
  const Mask m = mask_of(args, segments);
  switch (qkv.dtype) {
    case DType::kF32:
      backward_typed<float>(args, dqkv.as<float>(), dout.as<float>(), qkv.as<float>(),
                            probs.as<float>(), m);
      break;
    case DType::kF64:
      backward_typed<double>(args, dqkv.as<double>(), dout.as<double>(), qkv.as<double>(),
                             probs.as<double>(), m);
      break;
    default:
      ANVIL_CHECK_MSG(false,
                      "cpu::attention_backward: qkv must be f32/f64, got " + engine::describe(qkv));
  }
}

}  // namespace anvil::ops::cpu
