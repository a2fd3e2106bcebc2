// Dispatcher of ops/copy_rows.h: dst[dst_rows[i], :] = src[src_rows[i], :] (=). Checks shapes,
// strides, dtypes, devices and the index vectors, then runs the CPU or the CUDA twin.
#include "ops/copy_rows.h"

#include <string>

#include "engine/dtype.h"
#include "engine/status.h"
#include "ops/arg_check.h"

namespace anvil::ops {
namespace {

using engine::describe;

void check_matrix(const char* arg, const ConstTensorView& v, const ConstTensorView& like,
                  const Stream& stream) {
  const bool ok = !v.empty() && v.ndim == 2 && v.device == stream.device() &&
                  v.dtype == like.dtype && v.dim(1) == like.dim(1) && v.strides[1] == 1 &&
                  v.strides[0] >= v.dim(1);
  ANVIL_CHECK_MSG(ok, std::string("copy_rows: ") + arg + " must be a 2-D " +
                          std::string(engine::dtype_name(like.dtype)) + " [rows, " +
                          std::to_string(like.dim(1)) +
                          "] on the stream's device with unit column stride and row stride >= " +
                          "cols, got " + describe(v));
}

}  // namespace

void copy_rows(TensorView dst, ConstTensorView src, ConstTensorView dst_rows,
               ConstTensorView src_rows, Stream& stream) {
  ANVIL_CHECK_MSG(src.ndim == 2, "copy_rows: src must be 2-D, got " + describe(src));
  const size_t es = engine::dtype_size(src.dtype);
  ANVIL_CHECK_MSG(es == 2 || es == 4 || es == 8,
                  "copy_rows: element size must be 2, 4 or 8 bytes, got " + describe(src));
  check_matrix("src", src, src, stream);
  check_matrix("dst", dst, src, stream);
  const int64_t n = dst_rows.numel();
  detail::check_arg("copy_rows", "dst_rows", dst_rows, engine::DType::kI32, {n}, stream);
  detail::check_arg("copy_rows", "src_rows", src_rows, engine::DType::kI32, {n}, stream);
  if (n == 0 || src.dim(1) == 0) return;
  if (stream.is_cuda()) {
    cuda::copy_rows(dst, src, dst_rows, src_rows, stream);
  } else {
    cpu::copy_rows(dst, src, dst_rows, src_rows, stream);
  }
}

}  // namespace anvil::ops
