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
  uint64_t offset = 0;     // Philox offset of the probability dropout
};

// Scratch the op needs beyond its saved probabilities (permuted q/k/v, their gradients...).
size_t attention_workspace_bytes(const AttentionArgs& args);

// out: [B*T, H*Dh] act (=); probs: [B, H, T, T] act (=, saved); qkv: [B*T, 3*H*Dh] act.
void attention_forward(const AttentionArgs& args, TensorView out, TensorView probs,
                       ConstTensorView qkv, Workspace ws, Stream& stream);

// dqkv: [B*T, 3*H*Dh] act (=); dout: [B*T, H*Dh] act; qkv, probs: from forward.
void attention_backward(const AttentionArgs& args, TensorView dqkv, ConstTensorView dout,
                        ConstTensorView qkv, ConstTensorView probs, Workspace ws,
                        Stream& stream);

}  // namespace anvil::ops
