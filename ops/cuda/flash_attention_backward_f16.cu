// The f16 instantiations of the flash attention backward (ops/cuda/flash_attention_backward.cuh),
// one translation unit per element type so the two compile in parallel.
#include "ops/cuda/flash_attention_backward.cuh"

namespace anvil::ops::cuda::flash {

void backward_f16(const Params& p, int batch, cudaStream_t stream) {
  launch_for_width<Backward, f16>(p, batch, stream);
}

}  // namespace anvil::ops::cuda::flash
