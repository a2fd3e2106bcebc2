// Kernel entry points of the flash attention (ops/cuda/flash_attention_{forward,backward}.cu),
// called by ops/cuda/flash_attention.cu, which fills Params from the checked views.
#pragma once

#include <cuda_runtime.h>

namespace anvil::ops::cuda::flash {

struct Params;

// o, lse (=) from q, k, v.
void forward(const Params& p, int batch, int head_dim, cudaStream_t stream);
// dvec (=, scratch), then dq, dk, dv (=) from dout, out, lse, q, k, v.
void backward(const Params& p, int batch, int head_dim, cudaStream_t stream);

}  // namespace anvil::ops::cuda::flash
