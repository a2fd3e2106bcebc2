// Where a tensor lives and which backend runs an op on it.
#pragma once

#include <string_view>

namespace anvil::engine {

enum class Device { kCpu, kCuda };

std::string_view device_name(Device d);

// Number of usable CUDA devices; 0 (not an error) when there is no driver or no GPU, so binaries
// and tests fall back to the CPU or skip cleanly. Always 0 in a build without the kernels.
int cuda_device_count();

// False in a build without the CUDA kernels (cmake -DANVIL_CUDA_KERNELS=OFF: what `make demo`
// builds on a machine without a GPU), which runs on the CPU only.
bool cuda_kernels_built();

}  // namespace anvil::engine
