// Causal multi-head self-attention, the correct baseline (the flash kernel is a later issue):
//   q, k, v = split(qkv) per head;  S = q k^T * scale (masked: j > i -> -inf)
//   P = softmax(S) (saved);  P' = dropout(P);  out = P' v, heads concatenated       (= out, P)
//   backward: dqkv (=) through the same path; the dropout mask is regenerated from Philox.
// Layout: qkv: [B*T, 3*H*Dh] with q | k | v along the last dim, each [H, Dh] (GPT-2/HF c_attn);
// out: [B*T, H*Dh].
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
  int64_t batch, seq, heads, head_dim;
  float scale;             // usually 1/sqrt(head_dim)
  float dropout_p = 0.0f;  // on the probabilities
  uint64_t seed = 0;
  uint64_t offset = 0;  // Philox offset of the probability dropout
};

// Scratch the op needs beyond its saved probabilities (permuted q/k/v, their gradients...).
// The CUDA path needs this much (layout at the top of ops/cuda/attention.cu); it is sized for
// act dtypes up to 4 bytes (f32), as the args carry no dtype. The CPU twin needs none.
size_t attention_workspace_bytes(const AttentionArgs& args);

// out: [B*T, H*Dh] act (=); probs: [B, H, T, T] act (=, saved); qkv: [B*T, 3*H*Dh] act.
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, Workspace ws, Stream& stream);

// dqkv: [B*T, 3*H*Dh] act (=); dout: [B*T, H*Dh] act; qkv, probs: from forward.
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, Workspace ws, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64 plain loops (ws unused); cuda: bf16/f32 through batched cuBLASLt GEMMs, f32
// scores and softmax math. Dropout keeps element i (flat in [B, H, T, T]) when
// philox_uniform_at(seed, offset, i) >= p and scales it by 1 / (1 - p), as ops/dropout does.
namespace cpu {
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, Workspace ws, Stream& stream);
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, Workspace ws, Stream& stream);
}  // namespace cpu
namespace cuda {
// Bytes of scratch for act elements of `act_bytes` bytes (2: bf16, 4: f32).
size_t attention_workspace_bytes(const AttentionArgs& args, size_t act_bytes);
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, Workspace ws, Stream& stream);
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, Workspace ws, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
