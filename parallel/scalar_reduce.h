// Reduction of one host value over a group (losses, token counts, squared norms): the CPU
// backend reduces it in place; NCCL goes through a one-element device buffer.
//   returns op over the group's ranks of `local`                                 (synchronizes)
#pragma once

#include "engine/tensor.h"
#include "parallel/comm.h"

namespace anvil::parallel {

// scratch: [1] f64 on comm.device() (unused for CPU comms). Synchronizes `s` on CUDA.
double all_reduce_scalar(Comm& comm, double local, ReduceOp op, TensorView scratch,
                         engine::Stream& s);

}  // namespace anvil::parallel
