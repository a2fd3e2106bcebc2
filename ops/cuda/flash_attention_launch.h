// Kernel entry points of the flash attention (ops/cuda/flash_attention_{forward,backward}_*.cu),
// called by ops/cuda/flash_attention.cu, which fills Params from the checked views. One entry
// per element type; each runs the tile width of p.dh (ops/cuda/flash_attention_tiles.cuh).
#pragma once

#include <cuda_runtime.h>

namespace anvil::ops::cuda::flash {

struct Params;

// o, lse (=) from q, k, v.
void forward_bf16(const Params& p, int batch, cudaStream_t stream);
void forward_f16(const Params& p, int batch, cudaStream_t stream);
// dvec (=, scratch), then dq, dk, dv (=) from dout, out, lse, q, k, v.
void backward_bf16(const Params& p, int batch, cudaStream_t stream);
void backward_f16(const Params& p, int batch, cudaStream_t stream);

}  // namespace anvil::ops::cuda::flash
