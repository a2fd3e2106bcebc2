// Row argmax over the real vocabulary of a padded logits matrix (greedy next tokens, LAMBADA):
//   out[r] = min { c < cols : x[r, c] >= x[r, c'] for every c' < cols }            (=)
// x is row-major [rows, ld] with ld >= cols (the padded vocabulary); columns >= cols are never
// read. Ties go to the smallest index (torch.argmax's and numpy's rule); a NaN counts as larger
// than any number, so a row holding NaN returns its first NaN (torch.argmax's rule).
#pragma once

#include <cstdint>

#include "engine/stream.h"
#include "engine/tensor.h"

namespace anvil::ops {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

struct ArgmaxArgs {
  int64_t rows;
  int64_t cols;  // columns searched (the real vocabulary), 1 <= cols <= ld
  int64_t ld;    // row length of x (the padded vocabulary)
};

// out: [rows] i32 (=); x: [rows, ld] act, on the stream's device. CPU: f32, f64 or bf16;
// CUDA: f32 or bf16. rows may be 0 (a no-op).
void row_argmax(const ArgmaxArgs& args, TensorView out, ConstTensorView x, Stream& stream);

// Same-signature twins behind the dispatcher (tests call them directly).
namespace cpu {
void row_argmax(const ArgmaxArgs& args, TensorView out, ConstTensorView x, Stream& stream);
}  // namespace cpu
namespace cuda {
void row_argmax(const ArgmaxArgs& args, TensorView out, ConstTensorView x, Stream& stream);
}  // namespace cuda

}  // namespace anvil::ops
