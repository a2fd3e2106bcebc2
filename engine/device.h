// Where a tensor lives and which backend runs an op on it.
#pragma once

#include <string_view>

namespace anvil::engine {

enum class Device { kCpu, kCuda };

std::string_view device_name(Device d);

// Number of usable CUDA devices; 0 (not an error) when there is no driver or no GPU, so binaries
// and tests fall back to the CPU or skip cleanly.
int cuda_device_count();

}  // namespace anvil::engine
