// The f16 instantiations of the flash attention forward (ops/cuda/flash_attention_forward.cuh), one
// translation unit per element type so the two compile in parallel.
#include "ops/cuda/flash_attention_forward.cuh"

namespace anvil::ops::cuda::flash {

void forward_f16(const Params& p, int batch, cudaStream_t stream) {
  launch_for_width<Forward, f16>(p, batch, stream);
}

}  // namespace anvil::ops::cuda::flash
