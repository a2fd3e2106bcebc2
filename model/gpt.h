// GPT-2 (DESIGN.md §4): learned token + position embeddings, L pre-LN blocks
//   h = x + Drop(Attn(LN1(x)));  x' = h + Drop(MLP(LN2(h))),  MLP = W2 gelu_tanh(W1 . + b1) + b2
// final LN, LM head tied to the token embedding (logits = LNf(x) wte^T over the padded vocab),
// mean cross-entropy over counted tokens. Explicit forward/backward over ops/ with saved
// activations; gradients accumulate (+=) across micro-batches into f32 buffers.
// Precision: on CUDA, bf16 parameters/activations with f32 master weights, gradients and AdamW
// state; on the CPU everything f32 (or f64 for gradient checks: act_dtype = kF64).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "model/param_table.h"

namespace anvil::model {

struct GptConfig {
  int64_t vocab_size = 50257;  // real vocabulary
  int64_t padded_vocab = 0;    // 0: round vocab_size up to a multiple of 128
  int64_t max_seq_len = 1024;  // rows of the position embedding
  int64_t d_model = 768;
  int64_t n_heads = 12;
  int64_t n_layers = 12;
  int64_t ffn_hidden = 0;  // 0: 4 * d_model
  float hidden_dropout = 0.0f;
  float attention_dropout = 0.0f;
  float ln_eps = 1e-5f;
  float init_std = 0.02f;

  int64_t padded() const { return padded_vocab ? padded_vocab : (vocab_size + 127) / 128 * 128; }
  int64_t ffn() const { return ffn_hidden ? ffn_hidden : 4 * d_model; }
  int64_t head_dim() const { return d_model / n_heads; }
  // InvalidArgument naming the numbers (d_model % n_heads, padded < vocab, ...).
  absl::Status validate() const;
  // Parameters in GEMMs incl. the tied embedding (for MFU: 6N + 12 L d T FLOPs per token).
  int64_t matmul_params() const;
  int64_t total_params() const;
};

struct GptRunShape {
  int64_t micro_batch;  // B
  int64_t seq_len;      // T <= max_seq_len
};

struct GptPrecision {
  engine::Device device = engine::Device::kCpu;
  engine::DType act = engine::DType::kF32;   // params (compute copy) and activations
  engine::DType grad = engine::DType::kF32;  // gradients, master weights, optimizer state
};

class GptModel {
 public:
  // Bytes per category ("params", "master", "grads", "optimizer", "activations", "workspace")
  // this configuration needs, computed without allocating; create() allocates exactly this.
  // "master" is absent when act == grad dtype (the compute copy is the master). "workspace"
  // includes, on CUDA, the 32 MiB cuBLASLt workspace that forward/backward attach to the
  // caller's stream for their duration (the stream's own workspace is restored afterwards).
  static absl::StatusOr<engine::MemoryPlan> plan(const GptConfig& cfg, const GptRunShape& shape,
                                                 const GptPrecision& prec);
  // Allocates one arena per category and initializes parameters as GPT-2 does: N(0, init_std),
  // residual output projections N(0, init_std / sqrt(2 L)), biases 0, LN gamma 1 beta 0
  // (deterministic for `seed`, identical on CPU and GPU).
  static absl::StatusOr<std::unique_ptr<GptModel>> create(const GptConfig& cfg,
                                                          const GptRunShape& shape,
                                                          const GptPrecision& prec, uint64_t seed);
  ~GptModel();

  const GptConfig& config() const;
  ParamTable& params();
  // The flat buffers behind params(), [params().flat_numel()] each: compute copy (act dtype),
  // f32 master (the same memory as value when act == grad dtype), f32 gradients, AdamW moments.
  // Data parallelism all-reduces `grad` in place; ZeRO updates and gathers shards of them.
  struct FlatBuffers {
    engine::TensorView value, master, grad, m, v;
  };
  FlatBuffers flat_buffers();

  // Forward over one micro-batch. tokens, targets, positions: [B*T] i32 host arrays (targets < 0
  // are not counted). Returns nothing; the loss sum is read by loss_sum(). With `train` false
  // no activations for backward are kept and dropout is off.
  // dropout_offset numbers this forward (e.g. training micro-batches so far): dropout site s
  // uses Philox offset dropout_offset * dropout_offset_span() + s * stride, so distinct values
  // never share random numbers; the same value replays the same masks.
  // grad_scale = d(total loss)/d(loss of one token), e.g. 1 / tokens counted in the whole step.
  void forward(const int32_t* tokens, const int32_t* positions, const int32_t* targets, bool train,
               uint64_t dropout_offset, engine::Stream& stream);
  // Backward of the last forward; parameter gradients accumulate (+=) into grads().
  void backward(float grad_scale, engine::Stream& stream);
  // Sum of per-token losses of the last forward (syncs the stream).
  double loss_sum(engine::Stream& stream);

  void zero_grads(engine::Stream& stream);
  // sqrt(sum of squared gradients) (syncs).
  double grad_norm(engine::Stream& stream);
  // One AdamW step on all parameters (no decay on biases, LN and position... see ParamTable).
  struct OptimizerStep {
    float lr, beta1, beta2, eps, weight_decay, grad_scale;
    int64_t step;
  };
  void optimizer_step(const OptimizerStep& s, engine::Stream& stream);

  // Bytes actually held by the model's arenas, in total and for one plan category.
  size_t arena_bytes() const;
  size_t arena_bytes(const std::string& category) const;
  // Philox counters one forward may consume (see forward's dropout_offset).
  uint64_t dropout_offset_span() const;

 private:
  GptModel();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace anvil::model
