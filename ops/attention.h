// Causal multi-head self-attention with an optional per-document mask, the correct baseline (the
// flash kernel is a later issue):
//   q, k, v = split(qkv) per head;  S = q k^T * scale, masked where key j is not visible to query i
//   P = softmax(S) over the visible keys, exactly 0 elsewhere (saved);  P' = dropout(P);
//   out = P' v, heads concatenated                                                  (= out, P)
//   backward: dqkv (=) through the same path (masked entries get zero gradient); the dropout
//   mask is regenerated from Philox.
// Visibility: key j is visible to query i of sample b iff (j <= i or, when args.prefix_end is
// given, j < prefix_end[b*T + i]: a bidirectional prefix, see ops/flash_attention.h) and, when
// segments are given, segments[b*T + j] == segments[b*T + i]. The diagonal is always visible,
// so no row is empty.
// Layout: qkv: [B*T, 3*H*Dh] with q | k | v along the last dim, each [H, Dh] (GPT-2/HF c_attn);
// out: [B*T, H*Dh].
//
// Document mask (Megatron's --reset-attention-mask): segments: [B*T] i32, one document id per
// token, built from the input tokens of each sample as
//   seg[b*T + t] = number of eod tokens among positions 0 .. t-1 of sample b
// (the eod token itself belongs to the document it ends). This matches Megatron's
// get_ltor_masks_and_position_ids: after an eod at position i, positions > i cannot see
// positions <= i. An empty segments view (data == nullptr) is the plain causal mask. Any ids
// work (equal id = same document); they need not be increasing.
//
// Tensor-parallel dropout numbering: a rank holding heads [head_offset, head_offset + heads) of
// a model with total_heads heads numbers the probability-dropout elements as the single-rank run
// over all total_heads heads would, so the masks match it exactly (and differ across ranks):
//   keep(b, h, i, j) = philox_uniform_at(seed, offset, ((b*TH + head_offset + h)*T + i)*T + j) >= p
// with TH = total_heads (heads when 0). The site therefore uses Philox elements [0, B*TH*T*T):
// callers advance offset past B*TH*T*T/4 + 1 counters between sites.
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

struct AttentionArgs {
  int64_t batch, seq, heads, head_dim;  // heads: the heads this call computes
  float scale;                          // usually 1/sqrt(head_dim)
  float dropout_p = 0.0f;               // on the probabilities
  uint64_t seed = 0;
  uint64_t offset = 0;      // Philox offset of the probability dropout
  int64_t total_heads = 0;  // 0: heads (heads of the whole model, for the dropout numbering)
  int64_t head_offset = 0;  // first model head of this call: heads [head_offset, +heads)
  ConstTensorView prefix_end = {};  // [B*T] i32 or empty: keys j < prefix_end[b*T + i] visible
};

// Scratch the op needs beyond its saved probabilities (permuted q/k/v, their gradients...).
// The CUDA path needs this much (layout at the top of ops/cuda/attention.cu); it is sized for
// act dtypes up to 4 bytes (f32), as the args carry no dtype. The CPU twin needs none.
size_t attention_workspace_bytes(const AttentionArgs& args);

// out: [B*T, H*Dh] act (=); probs: [B, H, T, T] act (=, saved); qkv: [B*T, 3*H*Dh] act;
// segments: [B*T] i32 document ids on the stream's device, or empty (plain causal).
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, ConstTensorView segments, Workspace ws, Stream& stream);

// dqkv: [B*T, 3*H*Dh] act (=); dout: [B*T, H*Dh] act; qkv, probs, segments: as in forward.
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                        Workspace ws, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64 plain loops (ws unused); cuda: bf16/f32 through batched cuBLASLt GEMMs, f32
// scores and softmax math. Dropout keeps element (b, h, i, j) when philox_uniform_at(seed,
// offset, ((b*TH + head_offset + h)*T + i)*T + j) >= p and scales it by 1 / (1 - p), as
// ops/dropout does.
namespace cpu {
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, ConstTensorView segments, Workspace ws, Stream& stream);
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                        Workspace ws, Stream& stream);
}  // namespace cpu
namespace cuda {
// Bytes of scratch for act elements of `act_bytes` bytes (2: bf16, 4: f32).
size_t attention_workspace_bytes(const AttentionArgs& args, size_t act_bytes);
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, ConstTensorView segments, Workspace ws, Stream& stream);
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, ConstTensorView segments,
                        Workspace ws, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
