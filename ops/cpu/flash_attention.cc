// CPU twin of ops/flash_attention.h, the reference: plain loops over (batch, head, query row)
// in double, scores of a whole row at once (no tiling: the CUDA kernels tile).
//   s_ij = scale * q_i . k_j + bias_h(i, j) for visible j;  P_ij = exp(s_ij - lse_i)
//   out_i = sum_j P_ij keep_ij / (1 - p) v_j   (= out),  lse_i (= lse; +inf for an empty row)
// Backward (=), with dP_ij = keep_ij / (1 - p) * dout_i . v_j and D_i = sum_j P_ij dP_ij:
//   dS_ij = P_ij (dP_ij - D_i);  dq_i = scale sum_j dS_ij k_j;  dk_j = scale sum_i dS_ij q_i
//   dv_j = sum_i P_ij keep_ij / (1 - p) dout_i;  d rel_table[bucket(j - i), h] += sum dS_ij
// Grouped-query: query head h reads kv head h / group; dk, dv of a kv head are the sums over its
// group's query heads (accumulated in double, then stored once).
// Activations f32/f64 or f16/bf16 storage (read and rounded through scalar_io).
// The softmax is recomputed from the scores in double (the f32 lse is not read back), so the
// finite-difference tests in f64 see the exact gradient. With masks.dropout_keep, forward first
// writes every element's keep bit (Philox) and both directions read the mask from those bits.
#include "ops/flash_attention.h"

#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "engine/philox.h"
#include "ops/cpu/scalar_io.h"
#include "ops/flash_attention_detail.h"

namespace anvil::ops::cpu {
namespace {

// Strided row-major matrix of T elements: element (r, c) at data[r * ld + c].
// Elements are read and written through scalar_io (f16/bf16 storage rounds as on the device).
template <typename T>
struct Mat {
  T* data;
  int64_t ld;
  double get(int64_t r, int64_t c) const { return load(data, r * ld + c); }
  void set(int64_t r, int64_t c, double x) const { store(data, r * ld + c, x); }
};

template <typename T>
Mat<T> mat(TensorView v) {
  return {v.as<T>(), v.strides[0]};
}
template <typename T>
Mat<const T> mat(ConstTensorView v) {
  return {v.as<T>(), v.strides[0]};
}

const int32_t* ints(ConstTensorView v) { return v.empty() ? nullptr : v.as<int32_t>(); }

// Everything one (b, h) pair needs to score a row: visibility, bias and dropout.
struct RowScorer {
  const FlashAttentionArgs& a;
  const AttentionMasks& m;
  int64_t b, h;

  int64_t kv_col() const { return h / a.group() * a.head_dim; }  // of h's kv head in k, v
  bool visible(int64_t i, int64_t j) const {
    return detail::visible(a.causal, i, j, b, a.q_len, a.kv_len, ints(m.seg_q), ints(m.seg_k),
                           ints(m.kv_lengths), ints(m.prefix_end));
  }
  double bias(int64_t i, int64_t j) const {
    const int64_t th = a.total_heads == 0 ? a.heads : a.total_heads;
    switch (a.bias) {
      case AttentionBias::kAlibi:
        return static_cast<double>(alibi_slope(a.head_offset + h, th)) * static_cast<double>(j);
      case AttentionBias::kRelativeBuckets:
        return m.rel_table.as<float>()[bucket(i, j) * th + a.head_offset + h];
      case AttentionBias::kNone:
        break;
    }
    return 0.0;
  }
  int64_t bucket(int64_t i, int64_t j) const {
    return m.rel_buckets.as<int32_t>()[j - i + a.q_len - 1];
  }
  // Whether (i, j) is kept, from Philox.
  bool kept(int64_t i, int64_t j) const {
    const int64_t th = a.total_heads == 0 ? a.heads : a.total_heads;
    const uint64_t e =
        static_cast<uint64_t>(((b * th + a.head_offset + h) * a.q_len + i) * a.kv_len + j);
    return engine::philox_uniform_at(a.seed, a.offset, e) >= a.dropout_p;
  }
  // keep / (1 - p), or 0 when dropped: from the saved bits when given (forward wrote them
  // first), else from Philox.
  double keep(int64_t i, int64_t j) const {
    if (a.dropout_p == 0.0f) return 1.0;
    const bool k = m.dropout_keep.empty()
                       ? kept(i, j)
                       : (static_cast<uint32_t>(m.dropout_keep.as<int32_t>()[detail::keep_word(
                              b, h, a.heads, i, j, a.q_len, a.kv_len)]) >>
                          detail::keep_bit(i, j)) &
                             1u;
    return k ? 1.0 / (1.0 - static_cast<double>(a.dropout_p)) : 0.0;
  }
};

// Every element's keep bit into masks.dropout_keep (=; bits past Tq or Tk are 0).
void write_keep_bits(const FlashAttentionArgs& a, const AttentionMasks& m) {
  int32_t* words = m.dropout_keep.as<int32_t>();
  std::fill(words, words + flash_attention_keep_words(a), 0);
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const RowScorer rs{a, m, b, h};
      for (int64_t i = 0; i < a.q_len; ++i) {
        for (int64_t j = 0; j < a.kv_len; ++j) {
          if (!rs.kept(i, j)) continue;
          int32_t& w = words[detail::keep_word(b, h, a.heads, i, j, a.q_len, a.kv_len)];
          w = static_cast<int32_t>(static_cast<uint32_t>(w) | 1u << detail::keep_bit(i, j));
        }
      }
    }
  }
}

// P of row i (0 where not visible) and its lse (+inf for an empty row).
template <typename T>
double row_probs(const RowScorer& rs, Mat<const T> q, Mat<const T> k, int64_t i,
                 std::vector<double>* p) {
  const FlashAttentionArgs& a = rs.a;
  const int64_t qr = rs.b * a.q_len + i, col = rs.h * a.head_dim, kcol = rs.kv_col();
  double mx = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < a.kv_len; ++j) {
    double s = -std::numeric_limits<double>::infinity();
    if (rs.visible(i, j)) {
      double dot = 0.0;
      const int64_t kr = rs.b * a.kv_len + j;
      for (int64_t d = 0; d < a.head_dim; ++d) {
        dot += q.get(qr, col + d) * k.get(kr, kcol + d);
      }
      s = static_cast<double>(a.scale) * dot + rs.bias(i, j);
    }
    (*p)[j] = s;
    mx = std::max(mx, s);
  }
  if (mx == -std::numeric_limits<double>::infinity()) {
    std::fill(p->begin(), p->end(), 0.0);
    return std::numeric_limits<double>::infinity();
  }
  double sum = 0.0;
  for (double& s : *p) {
    s = std::exp(s - mx);
    sum += s;
  }
  for (double& s : *p) s /= sum;
  return mx + std::log(sum);
}

template <typename T>
void forward_typed(const FlashAttentionArgs& a, TensorView out, TensorView lse, ConstTensorView q,
                   ConstTensorView k, ConstTensorView v, const AttentionMasks& m) {
  const Mat<T> o = mat<T>(out);
  const Mat<const T> qm = mat<T>(q), km = mat<T>(k), vm = mat<T>(v);
  if (a.dropout_p > 0.0f && !m.dropout_keep.empty()) write_keep_bits(a, m);
  std::vector<double> p(static_cast<size_t>(a.kv_len)), acc(static_cast<size_t>(a.head_dim));
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t h = 0; h < a.heads; ++h) {
      const RowScorer rs{a, m, b, h};
      for (int64_t i = 0; i < a.q_len; ++i) {
        const double l = row_probs<T>(rs, qm, km, i, &p);
        lse.as<float>()[(b * a.heads + h) * a.q_len + i] = static_cast<float>(l);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < a.kv_len; ++j) {
          const double pj = p[j] * rs.keep(i, j);
          if (pj == 0.0) continue;
          for (int64_t d = 0; d < a.head_dim; ++d) {
            acc[d] += pj * vm.get(b * a.kv_len + j, rs.kv_col() + d);
          }
        }
        for (int64_t d = 0; d < a.head_dim; ++d) {
          o.set(b * a.q_len + i, h * a.head_dim + d, acc[d]);
        }
      }
    }
  }
}

// The gradient of one (b, h) pair: dq rows of the queries (=); d k, d v of h's kv head added
// to gk, gv [Tk * Dh] (double).
template <typename T>
void backward_head(const RowScorer& rs, Mat<T> dq, std::vector<double>* gk, std::vector<double>* gv,
                   float* d_table, Mat<const T> dout, Mat<const T> q, Mat<const T> k,
                   Mat<const T> v) {
  const FlashAttentionArgs& a = rs.a;
  const int64_t Dh = a.head_dim, col = rs.h * Dh, kcol = rs.kv_col();
  const int64_t th = a.total_heads == 0 ? a.heads : a.total_heads;
  const int64_t q0 = rs.b * a.q_len, k0 = rs.b * a.kv_len;
  std::vector<double> p(static_cast<size_t>(a.kv_len)), dp(p.size()), gq(static_cast<size_t>(Dh));
  for (int64_t i = 0; i < a.q_len; ++i) {
    row_probs<T>(rs, q, k, i, &p);
    double di = 0.0;
    for (int64_t j = 0; j < a.kv_len; ++j) {
      dp[j] = 0.0;
      if (p[j] == 0.0) continue;
      const double keep = rs.keep(i, j);
      double dot = 0.0;
      for (int64_t d = 0; d < Dh; ++d) {
        dot += dout.get(q0 + i, col + d) * v.get(k0 + j, kcol + d);
      }
      dp[j] = dot * keep;
      di += p[j] * dp[j];
      for (int64_t d = 0; d < Dh; ++d) {
        (*gv)[j * Dh + d] += p[j] * keep * dout.get(q0 + i, col + d);
      }
    }
    std::fill(gq.begin(), gq.end(), 0.0);
    for (int64_t j = 0; j < a.kv_len; ++j) {
      if (p[j] == 0.0) continue;
      const double ds = p[j] * (dp[j] - di);
      if (d_table != nullptr) {
        d_table[rs.bucket(i, j) * th + a.head_offset + rs.h] += static_cast<float>(ds);
      }
      const double g = ds * static_cast<double>(a.scale);
      for (int64_t d = 0; d < Dh; ++d) {
        gq[d] += g * k.get(k0 + j, kcol + d);
        (*gk)[j * Dh + d] += g * q.get(q0 + i, col + d);
      }
    }
    for (int64_t d = 0; d < Dh; ++d) dq.set(q0 + i, col + d, gq[d]);
  }
}

template <typename T>
void backward_typed(const FlashAttentionArgs& a, TensorView dq, TensorView dk, TensorView dv,
                    TensorView d_table, ConstTensorView dout, ConstTensorView q, ConstTensorView k,
                    ConstTensorView v, const AttentionMasks& m) {
  const int64_t Dh = a.head_dim, group = a.group();
  std::vector<double> gk(static_cast<size_t>(a.kv_len * Dh)), gv(gk.size());
  const Mat<T> dkm = mat<T>(dk), dvm = mat<T>(dv);
  for (int64_t b = 0; b < a.batch; ++b) {
    for (int64_t hk = 0; hk < a.kv(); ++hk) {
      std::fill(gk.begin(), gk.end(), 0.0);
      std::fill(gv.begin(), gv.end(), 0.0);
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
        backward_head<T>(RowScorer{a, m, b, h}, mat<T>(dq), &gk, &gv,
                         d_table.empty() ? nullptr : d_table.as<float>(), mat<T>(dout), mat<T>(q),
                         mat<T>(k), mat<T>(v));
      }
      for (int64_t j = 0; j < a.kv_len; ++j) {
        for (int64_t d = 0; d < Dh; ++d) {
          dkm.set(b * a.kv_len + j, hk * Dh + d, gk[j * Dh + d]);
          dvm.set(b * a.kv_len + j, hk * Dh + d, gv[j * Dh + d]);
        }
      }
    }
  }
}

}  // namespace

void flash_attention_forward(const FlashAttentionArgs& args, TensorView out, TensorView lse,
                             ConstTensorView q, ConstTensorView k, ConstTensorView v,
                             const AttentionMasks& masks, Stream& /*stream*/) {
  dispatch_float(q.dtype, "cpu::flash_attention_forward", [&](auto tag) {
    forward_typed<std::remove_pointer_t<decltype(tag)>>(args, out, lse, q, k, v, masks);
  });
}

void flash_attention_backward(const FlashAttentionArgs& args, TensorView dq, TensorView dk,
                              TensorView dv, TensorView d_rel_table, ConstTensorView dout,
                              ConstTensorView q, ConstTensorView k, ConstTensorView v,
                              ConstTensorView /*out*/, ConstTensorView /*lse*/,
                              const AttentionMasks& masks, Workspace /*ws*/, Stream& /*stream*/) {
  dispatch_float(q.dtype, "cpu::flash_attention_backward", [&](auto tag) {
    backward_typed<std::remove_pointer_t<decltype(tag)>>(args, dq, dk, dv, d_rel_table, dout, q, k,
                                                         v, masks);
  });
}

}  // namespace anvil::ops::cpu
