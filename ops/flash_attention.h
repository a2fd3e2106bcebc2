// Flash attention: multi-head scaled dot-product attention that never stores the Tq x Tk
// scores, the one attention op of GPT, BERT and T5 (self- and cross-attention).
// For sample b, head h (of this call), query i < Tq, key j < Tk:
//   s_ij  = scale * q_i . k_j + bias_h(i, j)          where visible(b, i, j), else -inf
//   P_ij  = exp(s_ij - lse_i),  lse_i = log sum_j exp(s_ij)                    (= lse, saved)
//   out_i = sum_j P_ij * keep_ij / (1 - p) * v_j                               (= out)
// A row with no visible key gives out_i = 0 and lse_i = +inf (so backward sees P = 0).
// Backward: dq, dk, dv (=) through the same path; P is recomputed from q, k and the saved lse,
// the dropout mask is read from the bits forward saved (AttentionMasks::dropout_keep) or, when
// none were given, regenerated from Philox. Deterministic (no atomics).
//
// Visibility: visible(b, i, j) = (!causal || j <= i || j < prefix_end[b*Tq + i] (when given))
//   && j < kv_lengths[b] (when given) && seg_q[b*Tq + i] == seg_k[b*Tk + j] (when segments are
//   given).
// causal is top-left aligned (key j visible to query i iff j <= i); used with Tq == Tk.
// prefix_end (causal only) is a per-query bidirectional prefix: query i also sees every key
// before prefix_end[b*Tq + i], later ones included. Prefix-LM passes one value per sample (its
// prefix length) on every query of the sample; packed T0/MTF sequences pass, on each token of a
// segment, the segment's start plus its input length (segments keep the documents apart), so
// each input is bidirectional and each target causal. Values need not be clamped (<= 0: plain
// causal; >= Tk: the whole row). The CUDA kernels skip only tiles that neither the diagonal nor
// the prefix makes visible.
// Segments are Megatron's reset_attention_mask document ids (see ops/attention.h for their
// construction from the tokens); kv_lengths is BERT/T5's key-padding mask.
//
// Bias (in logit units, added after scaling):
//   kNone
//   kAlibi           bias_h(i, j) = slope(head_offset + h, total_heads) * j, the BLOOM /
//                    Megatron-DeepSpeed slopes: for n heads and m = 2^floor(log2 n),
//                    slope(k) = 2^(-8(k+1)/m) for k < m, else 2^(-4(2(k-m)+1)/m)
//                    (softmax is invariant to the per-row shift, so this equals slope*(j-i)).
//   kRelativeBuckets bias_h(i, j) = rel_table[rel_buckets[j - i + Tq - 1], head_offset + h]
//                    (T5: the caller computes each relative distance's bucket once, on the host,
//                    with HF's formula; the table is learned). Backward accumulates
//                    d rel_table (+=), deterministically.
//
// Dropout on the probabilities, model-wide numbering (as ops/attention.h for Tq == Tk):
//   keep_ij = philox_uniform_at(seed, offset, ((b*TH + head_offset + h)*Tq + i)*Tk + j) >= p
// with TH = total_heads (heads when 0); a site uses B*TH*Tq*Tk Philox elements.
//
// Grouped-query attention (kv_heads < heads): k and v hold kv_heads heads and query head h
// reads kv head h / (heads / kv_heads), by index arithmetic (no copies); backward sums dk, dv
// over the heads / kv_heads query heads of each kv head, in a fixed order (deterministic).
// Relative buckets need kv_heads == heads.
//
// Layout: the heads of a row are consecutive head_dim-wide column blocks. q: [B*Tq, *] with row
// stride ldq, head h at columns [h*Dh, (h+1)*Dh); k, v: [B*Tk, *] (ldk, ldv); out: [B*Tq, *]
// (ldo). GPT passes column views of its fused qkv [B*T, 3*H*Dh] (ld 3*H*Dh), so no head
// gather or scatter is needed; dq, dk, dv may be the same views of dqkv.
// lse: [B, H, Tq] f32.
#pragma once

#include <cstddef>
#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;
using engine::Workspace;

enum class AttentionBias { kNone, kAlibi, kRelativeBuckets };

// Which CUDA forward kernel runs (the CPU twin ignores it):
//   kMmaSync  FlashAttention-2 schedule on mma.sync, every option, every GPU (the default);
//   kWgmma    Hopper-native (sm_90a wgmma + TMA, warp-specialized, FlashAttention-3 style) where
//             it applies: bf16, head size 64 or 128, no bias, no dropout, no prefix_end, on a
//             compute capability 9.0 GPU; anything else runs kMmaSync. Backward is kMmaSync
//             either way.
enum class AttentionKernel { kMmaSync, kWgmma };

struct FlashAttentionArgs {
  int64_t batch = 0, q_len = 0, kv_len = 0, heads = 0, head_dim = 0;
  bool causal = true;
  float scale = 1.0f;  // 1/sqrt(head_dim) for GPT/BERT; 1 for T5
  AttentionBias bias = AttentionBias::kNone;
  float dropout_p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;      // Philox offset of the probability dropout
  int64_t total_heads = 0;  // heads of the whole model (0: heads): dropout numbering, ALiBi
  int64_t head_offset = 0;  // first model head of this call
  int64_t kv_heads = 0;     // heads of k and v (0: heads); divides heads (grouped-query)
  AttentionKernel kernel = AttentionKernel::kMmaSync;  // CUDA forward kernel (see above)

  int64_t kv() const { return kv_heads == 0 ? heads : kv_heads; }
  int64_t group() const { return heads / kv(); }  // query heads per kv head
};

// Optional inputs; an empty view means "not used".
struct AttentionMasks {
  ConstTensorView seg_q;        // [B*Tq] i32 document ids of the queries
  ConstTensorView seg_k;        // [B*Tk] i32 document ids of the keys (given with seg_q)
  ConstTensorView kv_lengths;   // [B] i32: keys j >= kv_lengths[b] are padding
  ConstTensorView prefix_end;   // [B*Tq] i32 (causal only): keys j < prefix_end[b*Tq + i] visible
  ConstTensorView rel_buckets;  // [Tq + Tk - 1] i32: bucket of distance j - i at j - i + Tq - 1
  ConstTensorView rel_table;    // [num_buckets, total_heads] f32 (kRelativeBuckets)
  // Saved dropout mask: [flash_attention_keep_words(args)] i32, read as 32-bit words of keep
  // bits (layout: keep_word / keep_bit in ops/flash_attention_detail.h). With dropout_p > 0,
  // forward writes the bit of every visible element (=; the other bits are unspecified) and
  // backward reads them instead of regenerating Philox, so it must get what forward wrote for
  // the same arguments. B H ceil(Tq/16) ceil(Tk/64) 128 bytes; ignored when dropout_p == 0.
  TensorView dropout_keep;
};

// Words of AttentionMasks::dropout_keep for these arguments.
int64_t flash_attention_keep_words(const FlashAttentionArgs& args);

// ALiBi slope of model head k of n (Megatron-DeepSpeed's get_slopes).
float alibi_slope(int64_t k, int64_t n);

// Scratch of backward (CUDA: per-row dO.O sums and the relative-bias partial sums; CPU: none).
size_t flash_attention_workspace_bytes(const FlashAttentionArgs& args, int64_t num_buckets);

// out: [B*Tq, ldo] act (=); lse: [B, H, Tq] f32 (=); q: [B*Tq, ldq] (H heads); k, v:
// [B*Tk, ldk/ldv] act (kv_heads heads).
void flash_attention_forward(const FlashAttentionArgs& args, TensorView out, TensorView lse,
                             ConstTensorView q, ConstTensorView k, ConstTensorView v,
                             const AttentionMasks& masks, Stream& stream);

// dq, dk, dv (=) shaped as q, k, v; d_rel_table: [num_buckets, total_heads] f32 (+=), only with
// kRelativeBuckets (else empty); dout: as out; out and lse: what forward wrote.
void flash_attention_backward(const FlashAttentionArgs& args, TensorView dq, TensorView dk,
                              TensorView dv, TensorView d_rel_table, ConstTensorView dout,
                              ConstTensorView q, ConstTensorView k, ConstTensorView v,
                              ConstTensorView out, ConstTensorView lse, const AttentionMasks& masks,
                              Workspace ws, Stream& stream);

// Whether the CUDA kernels take activations of dtype act with this head_dim: bf16 or f16, head_dim
// a multiple of 8 in [32, 256] (kernels of tile widths 64, 96, 128, 192 and 256; a head smaller
// than its tile is zero-padded inside the kernel).
bool flash_attention_cuda_supports(engine::DType act, int64_t head_dim);

// Same-signature twins; the public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64 plain loops in double; cuda: flash_attention_cuda_supports (mma.sync tensor
// cores, f32 accumulation and softmax).
namespace cpu {
void flash_attention_forward(const FlashAttentionArgs& args, TensorView out, TensorView lse,
                             ConstTensorView q, ConstTensorView k, ConstTensorView v,
                             const AttentionMasks& masks, Stream& stream);
void flash_attention_backward(const FlashAttentionArgs& args, TensorView dq, TensorView dk,
                              TensorView dv, TensorView d_rel_table, ConstTensorView dout,
                              ConstTensorView q, ConstTensorView k, ConstTensorView v,
                              ConstTensorView out, ConstTensorView lse, const AttentionMasks& masks,
                              Workspace ws, Stream& stream);
}  // namespace cpu
namespace cuda {
// Whether forward with these arguments and masks runs the Hopper kernel (args.kernel == kWgmma
// and the kernel takes the case on this device); else it runs mma.sync.
bool flash_attention_forward_uses_wgmma(const FlashAttentionArgs& args, ConstTensorView q,
                                        ConstTensorView k, ConstTensorView v,
                                        const AttentionMasks& masks);
size_t flash_attention_workspace_bytes(const FlashAttentionArgs& args, int64_t num_buckets);
void flash_attention_forward(const FlashAttentionArgs& args, TensorView out, TensorView lse,
                             ConstTensorView q, ConstTensorView k, ConstTensorView v,
                             const AttentionMasks& masks, Stream& stream);
void flash_attention_backward(const FlashAttentionArgs& args, TensorView dq, TensorView dk,
                              TensorView dv, TensorView d_rel_table, ConstTensorView dout,
                              ConstTensorView q, ConstTensorView k, ConstTensorView v,
                              ConstTensorView out, ConstTensorView lse, const AttentionMasks& masks,
                              Workspace ws, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
