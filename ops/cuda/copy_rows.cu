// CUDA twin of ops/copy_rows.h: dst[dst_rows[i], :] = src[src_rows[i], :] (=). One block per
// copied row (grid-strided over rows), its threads striding over the columns; elements move
// as unsigned integers of the element's size (the copy is bit-exact for every dtype).
#include <algorithm>
#include <cstdint>

#include "engine/cuda_check.h"
#include "engine/dtype.h"
#include "ops/copy_rows.h"

namespace anvil::ops::cuda {
namespace {

constexpr int kThreads = 128;
constexpr int64_t kMaxBlocks = 65535;

template <typename U>
__global__ void copy_rows_kernel(U* dst, int64_t ld_dst, const U* src, int64_t ld_src,
                                 const int32_t* dst_rows, const int32_t* src_rows, int64_t n,
                                 int64_t cols) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    U* d = dst + static_cast<int64_t>(dst_rows[i]) * ld_dst;
    const U* s = src + static_cast<int64_t>(src_rows[i]) * ld_src;
    for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
  }
}

template <typename U>
void launch(TensorView dst, ConstTensorView src, ConstTensorView dst_rows, ConstTensorView src_rows,
            cudaStream_t stream) {
  const int64_t n = dst_rows.numel();
  const int64_t blocks = std::min<int64_t>(n, kMaxBlocks);
  copy_rows_kernel<U><<<blocks, kThreads, 0, stream>>>(
      static_cast<U*>(dst.data), dst.strides[0], static_cast<const U*>(src.data), src.strides[0],
      dst_rows.as<int32_t>(), src_rows.as<int32_t>(), n, src.dim(1));
}

}  // namespace

void copy_rows(TensorView dst, ConstTensorView src, ConstTensorView dst_rows,
               ConstTensorView src_rows, Stream& stream) {
  switch (engine::dtype_size(src.dtype)) {
    case 2:
      launch<uint16_t>(dst, src, dst_rows, src_rows, stream.cuda_stream());
      break;
    case 4:
      launch<uint32_t>(dst, src, dst_rows, src_rows, stream.cuda_stream());
      break;
    default:
      launch<uint64_t>(dst, src, dst_rows, src_rows, stream.cuda_stream());
      break;
  }
  ANVIL_CUDA_LAUNCH_CHECK();
}

}  // namespace anvil::ops::cuda
