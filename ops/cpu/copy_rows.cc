// CPU twin of ops/copy_rows.h: dst[dst_rows[i], :] = src[src_rows[i], :] (=), one memmove per
// row, every index range-checked.
#include "ops/copy_rows.h"

#include <cstring>
#include <string>

#include "engine/dtype.h"
#include "engine/status.h"

namespace anvil::ops::cpu {

void copy_rows(TensorView dst, ConstTensorView src, ConstTensorView dst_rows,
               ConstTensorView src_rows, Stream& /*stream*/) {
  const size_t es = engine::dtype_size(src.dtype);
  const size_t row_bytes = static_cast<size_t>(src.dim(1)) * es;
  const int32_t* di = dst_rows.as<int32_t>();  // [n]
  const int32_t* si = src_rows.as<int32_t>();  // [n]
  for (int64_t i = 0; i < dst_rows.numel(); ++i) {
    ANVIL_CHECK_MSG(di[i] >= 0 && di[i] < dst.dim(0) && si[i] >= 0 && si[i] < src.dim(0),
                    "copy_rows: index " + std::to_string(i) + " copies src row " +
                        std::to_string(si[i]) + " of " + std::to_string(src.dim(0)) +
                        " to dst row " + std::to_string(di[i]) + " of " +
                        std::to_string(dst.dim(0)));
    std::memmove(static_cast<char*>(dst.data) + di[i] * dst.strides[0] * es,
                 static_cast<const char*>(src.data) + si[i] * src.strides[0] * es, row_bytes);
  }
}

}  // namespace anvil::ops::cpu
