// Stream: where ops run. A CPU stream runs ops synchronously on the host; a CUDA stream owns a
// cudaStream_t plus the cuBLASLt handle GEMMs use on it (and a view of their workspace, carved
// by the owner from an arena). Event orders work across streams without device-wide syncs.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "absl/status/statusor.h"
#include "engine/device.h"
#include "engine/workspace.h"

namespace anvil::engine {

class Stream {
 public:
  static Stream cpu() { return Stream(); }
  // Selects `device_index`, creates a non-blocking stream and a cuBLASLt handle.
  static absl::StatusOr<Stream> cuda(int device_index);

  Stream(Stream&& other) noexcept;
  Stream& operator=(Stream&& other) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();

  Device device() const { return device_; }
  bool is_cuda() const { return device_ == Device::kCuda; }
  cudaStream_t cuda_stream() const { return stream_; }
  cublasLtHandle_t cublaslt() const { return cublaslt_; }

  // cuBLASLt workspace (32 MiB is what Hopper wants); empty means GEMMs run without one.
  Workspace gemm_workspace() const { return gemm_workspace_; }
  void set_gemm_workspace(Workspace ws) { gemm_workspace_ = ws; }

  // Blocks the host until all work queued on this stream is done (no-op on CPU).
  void synchronize() const;

 private:
  Stream() = default;
  void release();

  Device device_ = Device::kCpu;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t cublaslt_ = nullptr;
  Workspace gemm_workspace_;
};

class Event {
 public:
  static absl::StatusOr<Event> create();
  Event(Event&& other) noexcept;
  Event& operator=(Event&& other) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();

  void record(const Stream& s);
  void wait(const Stream& s) const;                  // s waits for the recorded work
  float elapsed_ms_since(const Event& start) const;  // syncs this event
  void synchronize() const;                          // the host waits for the recorded work

 private:
  Event() = default;
  cudaEvent_t event_ = nullptr;
};

}  // namespace anvil::engine
