// Device names and GPU discovery that tolerates a missing driver (and a build without the
// CUDA kernels, ANVIL_NO_CUDA_KERNELS, which sees no GPU).
#include "engine/device.h"

#include <cuda_runtime_api.h>

namespace anvil::engine {

std::string_view device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

bool cuda_kernels_built() {
#ifdef ANVIL_NO_CUDA_KERNELS
  return false;
#else
  return true;
#endif
}

int cuda_device_count() {
  if (!cuda_kernels_built()) return 0;
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

}  // namespace anvil::engine
