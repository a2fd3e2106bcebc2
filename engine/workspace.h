// Caller-owned scratch memory handed to an op (CUTLASS style): ops never allocate.
#pragma once

#include <cstddef>

namespace anvil::engine {

struct Workspace {
  void* data = nullptr;
  size_t bytes = 0;
};

}  // namespace anvil::engine
