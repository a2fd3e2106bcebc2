// CudaGraph: the work a function queues on one CUDA stream, recorded once (stream capture) and
// replayed with a single launch. Replays run the same kernels on the same addresses with the
// same arguments, so everything that changes between replays must live in device memory that
// the recorded kernels read (batch tokens, device-side scalars), never in a host argument.
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

#include "absl/status/statusor.h"
#include "engine/stream.h"

namespace anvil::engine {

class CudaGraph {
 public:
  // Records what `body` queues on s (a CUDA stream) without running it. Fails with the CUDA
  // error when the body did something a capture cannot hold (a host sync, a pageable copy).
  static absl::StatusOr<CudaGraph> capture(const Stream& s, const std::function<void()>& body);
  CudaGraph(CudaGraph&& other) noexcept;
  CudaGraph& operator=(CudaGraph&& other) noexcept;
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  ~CudaGraph();

  // Queues one replay on s.
  void launch(const Stream& s) const;
  // Kernel, copy and memset nodes the recording holds.
  size_t nodes() const { return nodes_; }

 private:
  CudaGraph() = default;
  void release();
  cudaGraph_t graph_ = nullptr;
  cudaGraphExec_t exec_ = nullptr;
  size_t nodes_ = 0;
};

}  // namespace anvil::engine
