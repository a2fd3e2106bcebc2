// Dispatcher for the row-major strided-batched GEMM with epilogues and for the bias gradient
// (math in ops/gemm.h):
//   D[b] = epilogue(alpha * op(A[b]) op(B[b]) + beta * D[b])   (= when beta = 0, += when 1)
//   dbias[n] += sum over rows of dy[rows, n]
//   gemm_bias_grad: the plain GEMM and dbias[m] += sum over k of A[k, m] in one call
// Checks shapes, dtypes and devices, then runs the CPU twin (OpenBLAS) or the CUDA twin
// (cuBLASLt).
#include "ops/gemm.h"

#include <string>

#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;
using engine::DType;

std::string gemm_expected(const char* arg, const std::string& want, const ConstTensorView& got) {
  return std::string("gemm: ") + arg + " must be " + want + ", got " + describe(got);
}

std::string dims(int64_t rows, int64_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

// One operand of a strided batch: `rows x cols` per matrix, `stride` elements apart (0 = packed).
// Packed operands must hold exactly batch*rows*cols elements with cols as the last dimension;
// explicitly strided ones must at least reach the last matrix.
void check_operand(const char* arg, const ConstTensorView& v, DType dtype, const std::string& dt,
                   engine::Device dev, int64_t rows, int64_t cols, int64_t batch, int64_t stride) {
  ANVIL_CHECK_MSG(!v.empty() && v.dtype == dtype && v.device == dev && v.is_contiguous(),
                  gemm_expected(arg, "a contiguous " + dt + " tensor on the stream's device", v));
  if (stride == 0) {
    ANVIL_CHECK_MSG(v.numel() == batch * rows * cols && (v.ndim < 2 || v.dim(-1) == cols),
                    gemm_expected(arg, std::to_string(batch) + " x " + dims(rows, cols), v));
  } else {
    ANVIL_CHECK_MSG(stride > 0 && v.numel() >= (batch - 1) * stride + rows * cols,
                    gemm_expected(arg,
                                  std::to_string(batch) + " x " + dims(rows, cols) + " matrices " +
                                      std::to_string(stride) + " elements apart",
                                  v));
  }
}

// Every argument of gemm (shapes, dtypes, devices, epilogue operands).
void check_gemm(const GemmArgs& args, const TensorView& d, const ConstTensorView& a,
                const ConstTensorView& b, const ConstTensorView& bias, const TensorView& pre_gelu,
                Stream& stream) {
  ANVIL_CHECK_MSG(args.m >= 1 && args.n >= 1 && args.k >= 1 && args.batch >= 1,
                  "gemm: need m, n, k, batch >= 1, got m=" + std::to_string(args.m) +
                      " n=" + std::to_string(args.n) + " k=" + std::to_string(args.k) +
                      " batch=" + std::to_string(args.batch));
  ANVIL_CHECK_MSG(args.epilogue != Epilogue::kBiasGradA,
                  "gemm: kBiasGradA is gemm_bias_grad's own epilogue; call gemm_bias_grad");
  ANVIL_CHECK_MSG(args.epilogue == Epilogue::kNone || args.batch == 1,
                  "gemm: epilogues need batch == 1, got batch=" + std::to_string(args.batch));
  ANVIL_CHECK_MSG(args.stride_d == 0 || args.stride_d >= args.m * args.n,
                  "gemm: stride_d must be 0 or >= m*n (no overlapping outputs), got " +
                      std::to_string(args.stride_d));
  const engine::Device dev = stream.device();
  const DType act = a.dtype;
  const std::string act_name = stream.is_cuda() ? "bf16/f16/f32" : "bf16/f16/f32/f64";
  ANVIL_CHECK_MSG(detail::is_act_dtype(act, stream), gemm_expected("a", act_name, a));
  const int64_t m = args.m, n = args.n, k = args.k, batch = args.batch;
  // Stored shapes: A [m, k] or [k, m] (trans_a); B [k, n] or [n, k] (trans_b).
  check_operand("a", a, act, std::string(engine::dtype_name(act)), dev, args.trans_a ? k : m,
                args.trans_a ? m : k, batch, args.stride_a);
  check_operand("b", b, act, std::string(engine::dtype_name(act)), dev, args.trans_b ? n : k,
                args.trans_b ? k : n, batch, args.stride_b);
  // D is the act dtype, or f32 with bf16/f16 A/B (weight gradients accumulated in f32).
  const bool d_f32_ok = (act == DType::kBF16 || act == DType::kF16) && d.dtype == DType::kF32;
  const DType d_dtype = d_f32_ok ? DType::kF32 : act;
  check_operand("d", d, d_dtype, d_f32_ok ? "f32" : std::string(engine::dtype_name(act)), dev, m, n,
                batch, args.stride_d);

  const bool wants_bias = args.epilogue == Epilogue::kBias || args.epilogue == Epilogue::kBiasGelu;
  const bool wants_pre = args.epilogue == Epilogue::kBiasGelu || args.epilogue == Epilogue::kDGelu;
  if (wants_bias) {
    ANVIL_CHECK_MSG(!bias.empty() && bias.dtype == act && bias.device == dev &&
                        bias.is_contiguous() && bias.numel() == n,
                    gemm_expected("bias",
                                  "a contiguous " + std::string(engine::dtype_name(act)) + " [" +
                                      std::to_string(n) + "]",
                                  bias));
  } else {
    ANVIL_CHECK_MSG(bias.empty(), gemm_expected("bias", "empty for this epilogue", bias));
  }
  if (wants_pre) {
    ANVIL_CHECK_MSG(
        !pre_gelu.empty() && pre_gelu.dtype == act && pre_gelu.device == dev &&
            pre_gelu.is_contiguous() && pre_gelu.numel() == m * n &&
            (pre_gelu.ndim < 2 || pre_gelu.dim(-1) == n),
        gemm_expected("pre_gelu",
                      "a contiguous " + std::string(engine::dtype_name(act)) + " " + dims(m, n),
                      pre_gelu));
  } else {
    ANVIL_CHECK_MSG(pre_gelu.empty(),
                    gemm_expected("pre_gelu", "empty for this epilogue", pre_gelu));
  }
}

// dbias: a contiguous [n] f32 tensor (f64 for f64 sums) on the stream's device.
void check_dbias(const char* op, const TensorView& dbias, engine::DType want, int64_t n,
                 const std::string& of, Stream& stream) {
  ANVIL_CHECK_MSG(!dbias.empty() && dbias.dtype == want && dbias.device == stream.device() &&
                      dbias.is_contiguous() && dbias.numel() == n,
                  std::string(op) + ": dbias must be a contiguous " +
                      std::string(engine::dtype_name(want)) + " [" + std::to_string(n) + "] (" +
                      of + "), got " + describe(dbias));
}

}  // namespace

void gemm(const GemmArgs& args, TensorView d, ConstTensorView a, ConstTensorView b,
          ConstTensorView bias, TensorView pre_gelu, Stream& stream) {
  check_gemm(args, d, a, b, bias, pre_gelu, stream);
  if (stream.is_cuda()) {
    cuda::gemm(args, d, a, b, bias, pre_gelu, stream);
  } else {
    cpu::gemm(args, d, a, b, bias, pre_gelu, stream);
  }
}

void gemm_bias_grad(const GemmArgs& args, TensorView d, TensorView dbias, ConstTensorView a,
                    ConstTensorView b, Stream& stream) {
  ANVIL_CHECK_MSG(args.trans_a && args.epilogue == Epilogue::kNone && args.batch == 1,
                  "gemm_bias_grad: needs trans_a (a = dy [rows, out]), no epilogue and batch 1");
  check_gemm(args, d, a, b, {}, {}, stream);
  check_dbias("gemm_bias_grad", dbias, a.dtype == DType::kF64 ? DType::kF64 : DType::kF32, args.m,
              "m, the columns of a " + describe(a), stream);
  if (stream.is_cuda()) {
    cuda::gemm_bias_grad(args, d, dbias, a, b, stream);
  } else {
    cpu::gemm_bias_grad(args, d, dbias, a, b, stream);
  }
}

void bias_backward(TensorView dbias, ConstTensorView dy, Stream& stream) {
  const engine::Device dev = stream.device();
  const bool dy_ok = detail::is_act_dtype(dy.dtype, stream);
  ANVIL_CHECK_MSG(!dy.empty() && dy_ok && dy.device == dev && dy.is_contiguous() && dy.ndim >= 1,
                  "bias_backward: dy must be a contiguous bf16/f16/f32 tensor on the stream's "
                  "device, got " +
                      describe(dy));
  // f64 dbias only for f64 dy (CPU finite-difference checks); otherwise f32.
  check_dbias("bias_backward", dbias, dy.dtype == DType::kF64 ? DType::kF64 : DType::kF32,
              dy.dim(-1), "the last dim of dy " + describe(dy), stream);
  if (stream.is_cuda()) {
    cuda::bias_backward(dbias, dy, stream);
  } else {
    cpu::bias_backward(dbias, dy, stream);
  }
}

}  // namespace anvil::ops
