// Optimizer offload (DeepSpeed's ZeRO-Offload): the f32 master weights and AdamW moments of this
// rank's optimizer shard live in host memory (pinned with cudaHostAlloc on CUDA, aligned host
// memory on the CPU device), and each step runs on the host:
//   grad (device, f32, reduced and unscaled as the trainer has it) -> host staging
//   host AdamW (ops/host_adamw.h, multi-threaded, bitwise equal to the CPU twin) on master, m, v
//   cast(master) -> host staging -> value (device, the compute copy)
// The work is cut into chunks of at most chunk_elems. CUDA: every chunk's gradient copy is
// queued on the caller's stream at once, each followed by an event; the host steps chunk k as
// soon as its event completes (the copies of chunks k+1.. still in flight) and queues chunk k's
// parameter copy on a side stream, so it overlaps the step of chunk k+1; the caller's stream
// then waits for the side stream. CPU: the same copies and steps, in order (memmove).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/dtype.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "ops/adamw.h"

namespace anvil::parallel {

// A piece of the flat parameters: numel elements at state_begin in the optimizer state and the
// gradient, at value_begin in the compute copy; decay: with weight decay (else 0).
struct OffloadRange {
  int64_t state_begin = 0, value_begin = 0, numel = 0;
  bool decay = true;
};

struct OffloadOptions {
  int threads = 0;                // host AdamW threads; 0: std::thread::hardware_concurrency
  int64_t chunk_elems = 1 << 22;  // elements per overlapped chunk (16 MiB of f32)
};

class OffloadOptimizer {
 public:
  // numel: this rank's optimizer state elements; param_dtype: the compute copy's dtype (f32,
  // bf16, f16); device: where gradients and the compute copy live.
  static absl::StatusOr<std::unique_ptr<OffloadOptimizer>> create(int64_t numel,
                                                                  engine::DType param_dtype,
                                                                  engine::Device device,
                                                                  int cuda_device,
                                                                  OffloadOptions options);
  // Host bytes create() allocates (for the memory plan).
  static size_t host_bytes(int64_t numel, engine::DType param_dtype);

  // [numel] f32 host views of the state (initialize master from the parameters, m = v = 0).
  engine::TensorView master() const { return master_; }
  engine::TensorView m() const { return m_; }
  engine::TensorView v() const { return v_; }
  int threads() const { return threads_; }

  // One AdamW step over `ranges`. grad: [numel] f32 on the stream's device (state
  // coordinates); value: the compute copy on the stream's device (value coordinates), or empty
  // to skip the copy back. Returns with the value copies ordered before later work on s.
  void step(const ops::AdamWArgs& args, const std::vector<OffloadRange>& ranges,
            engine::ConstTensorView grad, engine::TensorView value, engine::Stream& s);

 private:
  OffloadOptimizer() = default;

  engine::Arena arena_;
  engine::TensorView master_, m_, v_;  // [numel] f32 host
  engine::TensorView grad_host_;       // [numel] f32 host staging
  engine::TensorView param_host_;      // [numel] param dtype host staging
  int threads_ = 1;
  int64_t chunk_elems_ = 0;
  std::unique_ptr<engine::Stream> side_;   // CUDA: the host -> device copies
  std::vector<engine::Event> grad_ready_;  // CUDA: one per chunk
  std::unique_ptr<engine::Event> params_done_;
};

}  // namespace anvil::parallel
