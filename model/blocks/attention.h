// The attention block GPT, BERT and T5 share: one TP rank's part of multi-head attention,
// self (q | k | v from x) or cross (q from x, k | v from a memory, T5's encoder output):
//   self : qkv = x W_qkv^T (+ b_qkv)                 [rows, 3 I]       (=, saved)
//   cross: q = x W_q^T (+ b_q)  [rows, I];  kv = m W_kv^T (+ b_kv)  [kv_rows, 2 I]  (=, saved)
//   q, k rotated by their positions (rotary only; in place, so the saved q, k are rotated)
//   att = attention(q, k, v)                          [rows, I]         (=, saved, + lse / probs)
//   out = att W_o^T (+ b_o, TP rank 0)                [rows, d]         (=, this rank's partial
//   sum)
// with I = (heads / tp) * head_dim, rows = batch * q_len, kv_rows = batch * kv_len.
// Grouped-query self-attention (kv_heads < heads, G = heads / kv_heads query heads per kv
// head): W_qkv has (heads + 2 kv_heads) * head_dim rows in Megatron-core's grouped order, per
// kv head g: [q heads g*G .. g*G+G-1 | k_g | v_g] (each head_dim rows), so a TP rank's rows (its
// kv_heads / tp groups) are one contiguous block; qkv's columns follow the same order. The
// core runs once per local group (G query heads on one kv head, ops/flash_attention.h's
// kv_heads, no copies); lse is then [kv_heads / tp][B, G, Tq]. Flash only, self-attention only.
// The attention core is ops/flash_attention.h (saved: lse [B, H / tp, Tq] f32) or, causal
// self-attention only, the unfused ops/attention.h (saved: probs [B, H / tp, T, T]; with
// recompute_probs the backward recomputes them first, selective recomputation).
// Positions are a spec: none / learned (added to x by the embedding block, nothing here),
// rotary (q, k rotated), ALiBi (flash bias from the model head numbers) or relative buckets
// (flash bias from the inputs' bucket table and the learned [buckets, heads] f32 table).
// Masks: causal (config), padding (kv_lengths), document ids (segments) and bidirectional prefix
// ends (prefix_end: prefix-LM) come with the inputs.
// The probability dropout numbers its elements over the model's heads (head_offset), so a TP
// rank draws the same masks as one rank holding all heads.
// Backward from d out [rows, d]: weight (and bias) gradients (+=), d rel_table (+=, f32), d x
// (=, this rank's partial sum) and, cross only, d m (+=, partial sum).
// Tensor parallelism (Megatron): W_qkv / W_q / W_kv column-parallel (this rank's heads), W_o
// row-parallel. As in the MLP block (mlp.h), the TP mappings, the output dropout and the
// residual add stay with the caller, which owns the residual stream's row layout.
// Private to model/.
#pragma once

#include <cstdint>
#include <string>

#include "engine/stream.h"
#include "engine/tensor.h"
#include "engine/workspace.h"
#include "model/blocks/mlp.h"
#include "ops/flash_attention.h"
#include "ops/rotary.h"

namespace anvil::model::blocks {

// How the block sees token positions. kNone also covers learned absolute positions (added to
// the block's input by the embedding block).
enum class AttentionPosition { kNone, kRotary, kAlibi, kRelativeBuckets };

struct AttentionConfig {
  int64_t batch = 0, q_len = 0, kv_len = 0;  // kv_len: q_len for self-attention
  int64_t heads = 0;                         // heads of the whole model
  int64_t kv_heads = 0;                      // key/value heads of the whole model (0: heads)
  int64_t head_dim = 0;
  int64_t tp = 1, tp_rank = 0;   // this rank holds heads [tp_rank, tp_rank + 1) * heads / tp
  bool cross = false;            // q from x, k | v from the memory
  bool causal = false;           // key j visible to query i only when j <= i
  bool flash = true;             // else the unfused op (causal self-attention, kNone only)
  bool recompute_probs = false;  // unfused: the backward recomputes the probabilities
  float scale = 1.0f;            // logits = scale q . k (+ bias)
  AttentionPosition position = AttentionPosition::kNone;
  int64_t rotary_dim = 0;  // rotary: rotated dims of each head
  float rotary_base = 10000.0f;
  ops::RotaryScaling rotary_scaling;  // HF rope_scaling of the frequencies (ops/rotary.h)
  float dropout = 0.0f;               // on the probabilities (train only)
  ops::AttentionKernel kernel = ops::AttentionKernel::kMmaSync;  // CUDA flash forward kernel
  bool save_dropout_mask = false;  // flash with dropout: acts.keep holds the forward's keep bits

  // Whether the saved activations include the dropout keep bits.
  bool saves_keep() const { return flash && dropout > 0.0f && save_dropout_mask; }

  int64_t local_heads() const { return heads / tp; }
  int64_t kv() const { return kv_heads == 0 ? heads : kv_heads; }
  bool grouped() const { return kv() != heads; }
  int64_t group() const { return heads / kv(); }  // query heads per kv head (G)
  int64_t local_kv_heads() const { return kv() / tp; }
  // Self-attention qkv columns: 3I, or (heads + 2 kv_heads) / tp * head_dim when grouped.
  int64_t qkv_cols() const {
    return grouped() ? (local_heads() + 2 * local_kv_heads()) * head_dim : 3 * inner();
  }
  int64_t inner() const { return local_heads() * head_dim; }  // I
  int64_t head_offset() const { return tp_rank * local_heads(); }
  int64_t rows() const { return batch * q_len; }
  int64_t kv_rows() const { return batch * kv_len; }
};

// Values or gradients; biases are empty when the layer has none. Self: qkv_w [qkv_cols, d],
// qkv_b [qkv_cols]; cross: qkv_w = W_q [I, d], qkv_b [I], kv_w [2I, d_mem], kv_b [2I]. out_w [d,
// I], out_b [d].
struct AttentionWeights {
  engine::TensorView qkv_w, qkv_b;
  engine::TensorView kv_w, kv_b;
  engine::TensorView out_w, out_b;
};

// Saved by the forward. qkv: [rows, 3I] (self) or q [rows, I] (cross); kv: [kv_rows, 2I]
// (cross); lse: [B, H / tp, Tq] f32 (flash); probs: [B, H / tp, T, T] (unfused); att: [rows, I];
// keep: [dropout_keep_words] i32, the dropout keep bits (saves_keep(), else empty; grouped: one
// block per local group).
struct AttentionActs {
  engine::TensorView qkv, kv, lse, probs, att, keep;
};

// Words of the saved dropout keep bits of B x heads (this rank's) x Tq x Tk scores
// (ops::flash_attention_keep_words).
int64_t dropout_keep_words(int64_t batch, int64_t heads, int64_t q_len, int64_t kv_len);

// One micro-batch's position and mask inputs on the stream's device: positions [rows] i32
// (rotary); masks.seg_q / seg_k (document ids; the unfused op reads seg_q), prefix_end (both
// ops), kv_lengths (padding), rel_buckets and rel_table (relative buckets).
struct AttentionInputs {
  engine::ConstTensorView positions;
  ops::AttentionMasks masks;
};

// Backward scratch (act dtype): dqkv [rows, 3I] (self) or d q [rows, I] (cross); dkv
// [kv_rows, 2I] (cross); datt [rows, I]. datt may alias the block's dx (it is consumed first);
// neither may alias dqkv / dkv.
struct AttentionScratch {
  engine::TensorView dqkv, dkv, datt;
};

// The probability dropout's Philox key and counter offset (unused with dropout 0).
struct AttentionDropoutSite {
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// out [rows, d] (=, partial over TP), acts (=) from x [rows, d] and, cross only, the memory
// [kv_rows, d_mem]. train: apply the probability dropout. ws: the unfused op's scratch.
void attention_forward(const AttentionConfig& c, engine::TensorView out, const AttentionActs& acts,
                       engine::ConstTensorView x, engine::ConstTensorView memory,
                       const AttentionWeights& w, const AttentionInputs& in, bool train,
                       const AttentionDropoutSite& site, engine::Workspace ws, engine::Stream& s);

// dx [rows, d] (=, partial over TP), dmemory [kv_rows, d_mem] (+=, cross only), grads (+=) and
// d_rel_table [buckets, heads] f32 (+=, relative buckets only, else empty) from dout [rows, d],
// with the forward's x, memory, acts, inputs and site. The unfused op with recompute_probs
// rewrites acts.att and acts.probs (with the values the forward wrote).
void attention_backward(const AttentionConfig& c, engine::TensorView dx, engine::TensorView dmemory,
                        const AttentionWeights& grads, engine::TensorView d_rel_table,
                        engine::ConstTensorView dout, engine::ConstTensorView x,
                        engine::ConstTensorView memory, const AttentionActs& acts,
                        const AttentionWeights& w, const AttentionInputs& in,
                        const AttentionDropoutSite& site, const AttentionScratch& scratch,
                        engine::Workspace ws, engine::Stream& s);

// The block's saved activations in `dtype` (lse f32), named prefix + "qkv" / "kv" / "attn.lse" /
// "probs" / "att": the memory-plan entries of one layer and micro-batch.
AttentionActs attention_saved_acts(const AttentionConfig& c, engine::DType dtype,
                                   const std::string& prefix, const TakeView& take);

}  // namespace anvil::model::blocks
