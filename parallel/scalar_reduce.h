// Reduction of one host value over a group (losses, token counts, squared norms): the CPU
// backend reduces it in place; NCCL goes through a one-element device buffer.
//   returns op over the group's ranks of `local`                                 (synchronizes)
// And of a few host values over a group's CPU communicator (MPI or TCP):
//   v[i] = sum over the group's ranks of v[i]                                          (in place)
#pragma once

#include "absl/types/span.h"
#include "engine/tensor.h"
#include "parallel/comm.h"

namespace anvil::parallel {

// scratch: [1] f64 on comm.device() (unused for CPU comms). Synchronizes `s` on CUDA.
double all_reduce_scalar(Comm& comm, double local, ReduceOp op, TensorView scratch,
                         engine::Stream& s);

// host: a CPU communicator, or null (one rank: nothing to do).
void sum_host_values(Comm* host, absl::Span<double> v);

}  // namespace anvil::parallel
