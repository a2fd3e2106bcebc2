// Shared dispatcher argument checks (see ops/arg_check.h).
#include "ops/arg_check.h"

#include <string>

#include "engine/status.h"

namespace anvil::ops::detail {
namespace {

std::string dims(std::initializer_list<int64_t> shape) {
  std::string s = "[";
  for (int64_t d : shape) s += (s.size() > 1 ? ", " : "") + std::to_string(d);
  return s + "]";
}

}  // namespace

bool has_shape(const engine::ConstTensorView& v, std::initializer_list<int64_t> shape) {
  if (v.ndim != static_cast<int>(shape.size())) return false;
  int i = 0;
  for (int64_t d : shape) {
    if (v.shape[i++] != d) return false;
  }
  return v.is_contiguous();
}

void check_arg(const char* op, const char* arg, const engine::ConstTensorView& v,
               engine::DType dtype, std::initializer_list<int64_t> shape,
               const engine::Stream& stream) {
  const bool ok = (!v.empty() || v.numel() == 0) && v.dtype == dtype &&
                  v.device == stream.device() && has_shape(v, shape);
  ANVIL_CHECK_MSG(ok, std::string(op) + ": " + arg + " must be contiguous " +
                          std::string(engine::dtype_name(dtype)) + dims(shape) + " on " +
                          std::string(engine::device_name(stream.device())) + ", got " +
                          engine::describe(v));
}

bool is_act_dtype(engine::DType t, const engine::Stream& stream) {
  using engine::DType;
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32 ||
         (!stream.is_cuda() && t == DType::kF64);
}

void check_act_dtype(const char* op, engine::DType t, const engine::Stream& stream) {
  ANVIL_CHECK_MSG(is_act_dtype(t, stream),
                  std::string(op) +
                      ": activations must be bf16, f16 or f32 (f64 on the CPU), got " +
                      std::string(engine::dtype_name(t)));
}

engine::DType f32_or_f64(engine::DType act, engine::DType given) {
  using engine::DType;
  return act == DType::kF64 && given == DType::kF64 ? DType::kF64 : DType::kF32;
}

void check_elementwise_x(const char* op, const engine::ConstTensorView& x,
                         const engine::Stream& stream) {
  using engine::DType;
  const bool ok = is_act_dtype(x.dtype, stream) && (!x.empty() || x.numel() == 0) &&
                  x.device == stream.device() && x.is_contiguous();
  ANVIL_CHECK_MSG(
      ok, std::string(op) + ": x must be contiguous bf16, f16 or f32 (f64 on the CPU) on " +
              std::string(engine::device_name(stream.device())) + ", got " + engine::describe(x));
}

void check_like(const char* op, const char* arg, const engine::ConstTensorView& v,
                const engine::ConstTensorView& x, const engine::Stream& stream) {
  bool ok = (!v.empty() || v.numel() == 0) && v.dtype == x.dtype && v.device == stream.device() &&
            v.ndim == x.ndim && v.is_contiguous();
  for (int i = 0; ok && i < x.ndim; ++i) ok = v.shape[i] == x.shape[i];
  ANVIL_CHECK_MSG(ok, std::string(op) + ": " + arg + " must be contiguous, on " +
                          std::string(engine::device_name(stream.device())) +
                          " and like x = " + engine::describe(x) + ", got " + engine::describe(v));
}

}  // namespace anvil::ops::detail
