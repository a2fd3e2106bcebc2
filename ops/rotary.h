// Rotary position embedding (RoPE, Su et al. 2021), HF LLaMA / GPT-NeoX "rotate_half" layout,
// in place on q or k of each head. With R = rot_dim, half = R/2 and, for i < half,
//   inv_freq_i = base^(-2i/R),  theta = pos * inv_freq_i   (f32, as HF computes them)
// with inv_freq then rescaled by RotaryScaling (HF rope_scaling linear / llama3; the one
// computation, ops/rotary_detail.h, that training, inference and both twins use).
//   forward : (x_i, x_{i+half}) <- (x_i cos theta - x_{i+half} sin theta,
//                                   x_{i+half} cos theta + x_i sin theta)        (= in place)
//   backward: the transposed rotation (theta -> -theta) on dx                    (= in place)
// Dims [R, head_dim) of each head pass through unchanged (GPT-NeoX / Megatron rotary_percent).
// HF applies cos/sin after casting them to the activation dtype (LlamaRotaryEmbedding returns
// cos.to(x.dtype)), so with bf16 activations it rotates with bf16-rounded cos/sin; we keep
// cos/sin in f32 and round once at the store. The two differ by at most ~2^-8 relative per
// element, inside the bf16 tolerance of any parity check.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

// HF's rope_scaling (transformers modeling_rope_utils) applied to the default inv_freq, in f32:
//   kLinear: inv_freq_i / factor (positions divided by factor);
//   kLlama3 (_compute_llama3_parameters, Llama 3.1): with wavelen_i = 2 pi / inv_freq_i,
//     low = original_max_position / low_freq_factor, high = original_max_position /
//     high_freq_factor: wavelen > low: inv_freq / factor; wavelen < high: unchanged; between:
//     (1 - s) inv_freq / factor + s inv_freq, s = (original_max_position / wavelen -
//     low_freq_factor) / (high_freq_factor - low_freq_factor).
enum class RotaryScalingType { kNone, kLinear, kLlama3 };
struct RotaryScaling {
  RotaryScalingType type = RotaryScalingType::kNone;
  float factor = 1.0f;  // > 0
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;  // > low_freq_factor (llama3)
  int64_t original_max_position = 8192;
};

struct RotaryArgs {
  int64_t rows;      // tokens (B*T)
  int64_t heads;     // heads stored in each row
  int64_t head_dim;  // Dh: head h occupies columns [h*Dh, (h+1)*Dh)
  int64_t rot_dim;   // even, <= head_dim: rotary_percent * head_dim
  float base = 10000.0f;
  RotaryScaling scaling = {};
};

// The rot_dim / 2 frequencies the rotation uses (f32): for tests and plans.
std::vector<float> rotary_inv_freqs(float base, int64_t rot_dim, const RotaryScaling& scaling);

// x: [rows, >= heads*head_dim] act, row stride x.strides[0] (may be a column view of a fused qkv
// [B*T, 3*H*Dh], engine::slice_cols), unit column stride; positions: [rows] i32 (the position id
// of each row).
void rotary_forward(const RotaryArgs& args, TensorView x, ConstTensorView positions,
                    Stream& stream);
// dx: as x above; rotated back in place (the gradient of the forward rotation).
void rotary_backward(const RotaryArgs& args, TensorView dx, ConstTensorView positions,
                     Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: f32/f64/bf16 (angles in f32 like HF, rotation in double); cuda: bf16/f32 (f32 math).
namespace cpu {
void rotary_forward(const RotaryArgs& args, TensorView x, ConstTensorView positions,
                    Stream& stream);
void rotary_backward(const RotaryArgs& args, TensorView dx, ConstTensorView positions,
                     Stream& stream);
}  // namespace cpu
namespace cuda {
void rotary_forward(const RotaryArgs& args, TensorView x, ConstTensorView positions,
                    Stream& stream);
void rotary_backward(const RotaryArgs& args, TensorView dx, ConstTensorView positions,
                     Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
