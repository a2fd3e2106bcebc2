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
// The Hopper forward (flash_attention_forward_sm90a.cu, wgmma + TMA): whether it takes p (bf16
// activations assumed: head size 64 or 128, no bias, no dropout, 16-byte aligned views, a
// compute capability 9.0 device), and o, lse (=) from q, k, v.
bool forward_sm90a_supports(const Params& p);
void forward_sm90a_bf16(const Params& p, int batch, cudaStream_t stream);

}  // namespace anvil::ops::cuda::flash
