// copy / fill_zero / poison over CPU and CUDA views, asynchronous on the stream for CUDA.
#include "engine/memory.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "engine/cuda_check.h"

namespace anvil::engine {
namespace {

cudaMemcpyKind copy_kind(Device dst, Device src) {
  if (dst == Device::kCuda)
    return src == Device::kCuda ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice;
  return src == Device::kCuda ? cudaMemcpyDeviceToHost : cudaMemcpyHostToHost;
}

void fill_bytes(TensorView dst, int byte, const Stream& s) {
  ANVIL_CHECK_MSG(dst.is_contiguous(), "fill of non-contiguous " + describe(dst));
  if (dst.bytes() == 0) return;
  if (dst.device == Device::kCuda) {
    ANVIL_CUDA_CHECK(cudaMemsetAsync(dst.data, byte, dst.bytes(), s.cuda_stream()));
  } else {
    std::memset(dst.data, byte, dst.bytes());
  }
}

}  // namespace

void copy(TensorView dst, ConstTensorView src, const Stream& s) {
  ANVIL_CHECK_MSG(dst.numel() == src.numel() && dst.dtype == src.dtype,
                  absl::StrCat("copy ", describe(src), " -> ", describe(dst)));
  ANVIL_CHECK_MSG(dst.is_contiguous() && src.is_contiguous(), "copy of non-contiguous views");
  if (dst.bytes() == 0) return;
  if (dst.device == Device::kCpu && src.device == Device::kCpu) {
    std::memmove(dst.data, src.data, dst.bytes());
    return;
  }
  ANVIL_CUDA_CHECK(cudaMemcpyAsync(dst.data, src.data, dst.bytes(),
                                   copy_kind(dst.device, src.device), s.cuda_stream()));
}

void fill_zero(TensorView dst, const Stream& s) { fill_bytes(dst, 0, s); }
void poison(TensorView dst, const Stream& s) { fill_bytes(dst, 0xff, s); }

}  // namespace anvil::engine
