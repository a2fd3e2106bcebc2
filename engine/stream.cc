// RAII CUDA streams (with their cuBLASLt handle) and events.
#include "engine/stream.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/cuda_check.h"

namespace anvil::engine {

absl::StatusOr<Stream> Stream::cuda(int device_index) {
  cudaError_t err = cudaSetDevice(device_index);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(
        absl::StrCat("cannot use CUDA device ", device_index, ": ", cudaGetErrorString(err)));
  }
  Stream s;
  s.device_ = Device::kCuda;
  ANVIL_CUDA_CHECK(cudaStreamCreateWithFlags(&s.stream_, cudaStreamNonBlocking));
  ANVIL_CUBLAS_CHECK(cublasLtCreate(&s.cublaslt_));
  return s;
}

Stream::Stream(Stream&& o) noexcept { *this = std::move(o); }

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    stream_ = std::exchange(o.stream_, nullptr);
    cublaslt_ = std::exchange(o.cublaslt_, nullptr);
    gemm_workspace_ = std::exchange(o.gemm_workspace_, Workspace{});
  }
  return *this;
}

Stream::~Stream() { release(); }

void Stream::release() {
  if (cublaslt_) cublasLtDestroy(cublaslt_);
  if (stream_) cudaStreamDestroy(stream_);
  cublaslt_ = nullptr;
  stream_ = nullptr;
}

void Stream::synchronize() const {
  if (stream_) ANVIL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

absl::StatusOr<Event> Event::create() {
  Event e;
  cudaError_t err = cudaEventCreate(&e.event_);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::UnavailableError(absl::StrCat("cudaEventCreate: ", cudaGetErrorString(err)));
  }
  return e;
}

Event::Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (event_) cudaEventDestroy(event_);
    event_ = std::exchange(o.event_, nullptr);
  }
  return *this;
}
Event::~Event() {
  if (event_) cudaEventDestroy(event_);
}

void Event::record(const Stream& s) { ANVIL_CUDA_CHECK(cudaEventRecord(event_, s.cuda_stream())); }
void Event::wait(const Stream& s) const {
  ANVIL_CUDA_CHECK(cudaStreamWaitEvent(s.cuda_stream(), event_, 0));
}
void Event::synchronize() const { ANVIL_CUDA_CHECK(cudaEventSynchronize(event_)); }
float Event::elapsed_ms_since(const Event& start) const {
  ANVIL_CUDA_CHECK(cudaEventSynchronize(event_));
  float ms = 0;
  ANVIL_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

}  // namespace anvil::engine
