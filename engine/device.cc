// Device names and GPU discovery that tolerates a missing driver.
#include "engine/device.h"

#include <cuda_runtime_api.h>

namespace anvil::engine {

std::string_view device_name(Device d) { return d == Device::kCpu ? "cpu" : "cuda"; }

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

}  // namespace anvil::engine
