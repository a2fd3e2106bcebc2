// How one rank runs a model, whatever its family: the device and dtypes (Precision), the
// attention kernel, and activation recomputation (Recompute). Families, the trainer, inference
// and the tasks share these; [train] precision / device and [parallel] recompute fill them.
#pragma once

#include <string>

#include "engine/device.h"
#include "engine/dtype.h"
#include "ops/flash_attention.h"

namespace anvil::model {

// The device and dtypes of a model on one rank ([train] device and precision,
// model/train/precision_config.h).
struct Precision {
  engine::Device device = engine::Device::kCpu;
  engine::DType act = engine::DType::kF32;   // params (compute copy) and activations
  engine::DType grad = engine::DType::kF32;  // gradients, master weights, optimizer state
  // CUDA flash-attention forward ([train] attention_kernel): kWgmma runs the Hopper kernel where
  // it applies (ops/flash_attention.h), mma.sync elsewhere; the CPU ignores it.
  ops::AttentionKernel attention = ops::AttentionKernel::kMmaSync;
  // Flash attention with probability dropout ([train] attention_dropout_mask): save the forward's
  // keep bits (B H Tq Tk / 8 bytes a layer) for the backward instead of regenerating them from
  // Philox (the same bits either way).
  bool save_dropout_mask = true;
  // MLP activation dropout (T5 v1.0's DenseReluDense) in one pass with relu / gelu_erf
  // ([train] activation_dropout_kernel = one_pass): the same bits as the two ops. Off by default
  // until its CUDA kernel has run on a GPU (docs/performance.md).
  bool fused_activation_dropout = false;
};

// Dtype of layernorm statistics and per-token losses: f32, or f64 with f64 activations.
inline engine::DType stat_dtype(const Precision& prec) {
  return prec.act == engine::DType::kF64 ? engine::DType::kF64 : engine::DType::kF32;
}

// Activation recomputation (Megatron's --recompute-granularity): kSelective recomputes the
// attention core (probabilities) in backward instead of saving them; kFull saves only each
// layer's input and reruns the whole layer forward in backward.
enum class Recompute { kNone, kSelective, kFull };
// [parallel] recompute's value ("none", "selective", "full"; validated by the config) as the enum.
inline Recompute recompute_from_name(const std::string& name) {
  return name == "full"        ? Recompute::kFull
         : name == "selective" ? Recompute::kSelective
                               : Recompute::kNone;
}

}  // namespace anvil::model
