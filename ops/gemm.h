// Row-major (strided-batched) matrix multiply through cuBLASLt on the GPU, OpenBLAS on the CPU:
//   D[b] = alpha * op(A[b]) * op(B[b]) + beta * D[b]   then the epilogue (all row-major)
//   op(A) = A [m, k], or A^T when trans_a (A stored [k, m]); op(B) = B [k, n], or B^T when
//   trans_b (B stored [n, k]). beta = 1 accumulates (+=), beta = 0 overwrites (=).
// Epilogues (applied to acc = alpha * op(A) op(B) + beta * D):
//   kNone     D = acc
//   kBias     D = acc + bias[n]
//   kBiasGelu pre = acc + bias[n] (= into pre_gelu, saved for backward), D = gelu_tanh(pre)
//   kDGelu    D = acc * gelu_tanh'(pre_gelu)        (backward through a kBiasGelu forward)
// A, B: act dtype (bf16/f16/f32; f64 on the CPU); D: act dtype or f32 (f32 weight gradients);
// compute in f32. A linear layer y = x W^T + b is {m=tokens, n=out, k=in, trans_b=true}.
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

// kBiasGradA is internal to gemm_bias_grad (dbias = column sums of A); gemm() refuses it.
enum class Epilogue { kNone, kBias, kBiasGelu, kDGelu, kBiasGradA };

struct GemmArgs {
  int64_t m, n, k;
  bool trans_a = false;
  bool trans_b = false;
  float alpha = 1.0f;
  float beta = 0.0f;
  Epilogue epilogue = Epilogue::kNone;
  // Strided batch: `batch` independent products; strides in elements between consecutive
  // matrices (0 = contiguous m*k, k*n, m*n). Epilogues other than kNone need batch == 1.
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_d = 0;
};

// d: [batch, m, n] (rows contiguous); a, b: as GemmArgs says; bias: [n] act (kBias,
// kBiasGelu), else empty; pre_gelu: [m, n] act, written by kBiasGelu, read by kDGelu.
// The cuBLASLt workspace comes from stream.gemm_workspace().
void gemm(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
          ConstTensorView bias, TensorView pre_gelu, Stream& stream);

// dbias[n] += sum over rows of dy[rows, n].  dbias: [n] f32 (+=); dy: [rows, n] act.
// CUDA: row-split partial sums live in stream.gemm_workspace() (fixed split, fixed order:
// deterministic); without a workspace it runs unsplit.
void bias_backward(TensorView dbias, ConstTensorView dy, Stream& stream);

// A linear layer's weight and bias gradients in one pass over dy (args.trans_a, epilogue kNone):
//   d = alpha * op(A) op(B) + beta * d   (as gemm)   and   dbias[m] += sum_k A[k, m]
// With {m = out, n = in, k = rows, trans_a, beta = 1}, a = dy [rows, out], b = x [rows, in]:
// dW += dy^T x and dbias += column sums of dy (unscaled by alpha). dbias: [m] f32 (+=).
// CUDA: cuBLASLt's BGRADB epilogue writes the sums into a scratch at the end of
// stream.gemm_workspace() and a small kernel adds them (deterministic); where cuBLASLt has no
// such kernel, the plain GEMM and then bias_backward.
void gemm_bias_grad(const GemmArgs& args, TensorView d, TensorView dbias, ConstTensorView a,
                    ConstTensorView b, Stream& stream);

// Same-signature twins. The public functions check arguments and dispatch on stream.is_cuda().
// cpu: A/B/D f32 or f64 (OpenBLAS), bias/pre_gelu the A dtype, dbias f32 (f64 with f64 dy).
// cuda: A/B bf16 with D bf16 or f32, or all f32; bias/pre_gelu the A dtype; dbias f32.
// Where cuBLASLt has no fused kernel for an epilogue (aux ld n not a multiple of 8, mixed
// D/bias dtypes...) or for GELU epilogues with beta != 0, the CUDA twin runs the plain GEMM and
// then an elementwise epilogue kernel (same results up to rounding).
namespace cpu {
void gemm(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
          ConstTensorView bias, TensorView pre_gelu, Stream& stream);
void bias_backward(TensorView dbias, ConstTensorView dy, Stream& stream);
void gemm_bias_grad(const GemmArgs& args, TensorView d, TensorView dbias, ConstTensorView a,
                    ConstTensorView b, Stream& stream);
}  // namespace cpu
namespace cuda {
void gemm(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
          ConstTensorView bias, TensorView pre_gelu, Stream& stream);
void bias_backward(TensorView dbias, ConstTensorView dy, Stream& stream);
void gemm_bias_grad(const GemmArgs& args, TensorView d, TensorView dbias, ConstTensorView a,
                    ConstTensorView b, Stream& stream);
}  // namespace cuda

namespace detail {
// gemm_bias_grad calls on this host thread that ran fused (BGRADB epilogue), for tests and
// benches that must know which path ran.
size_t gemm_bias_grad_fused_calls();
}  // namespace detail

}  // namespace anvil::ops
