// Row gather/scatter between two row-strided matrices of one dtype (a pure copy, no math):
//   dst[dst_rows[i], :] = src[src_rows[i], :]   for i in [0, n)   (=; other rows untouched)
// Used by inference to write each new token's keys and values into its sequence's KV cache
// row and to pick the last prompt position of every sequence before the LM head.
#pragma once

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

// dst: [R_dst, cols], src: [R_src, cols]: 2-D views of one dtype (any 2-, 4- or 8-byte type)
// with unit column stride and any row stride >= cols (column blocks of a wider matrix work);
// dst_rows, src_rows: [n] i32 on the stream's device (n may be 0). Each index must lie in
// [0, R_dst) / [0, R_src) and the destination rows must be distinct (else the result is
// unspecified): a fatal CHECK on the CPU; on the GPU the indices are not read back.
void copy_rows(TensorView dst, ConstTensorView src, ConstTensorView dst_rows,
               ConstTensorView src_rows, Stream& stream);

// Same-signature twins. The public function checks arguments and dispatches on stream.is_cuda().
namespace cpu {
void copy_rows(TensorView dst, ConstTensorView src, ConstTensorView dst_rows,
               ConstTensorView src_rows, Stream& stream);
}  // namespace cpu
namespace cuda {
void copy_rows(TensorView dst, ConstTensorView src, ConstTensorView dst_rows,
               ConstTensorView src_rows, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
