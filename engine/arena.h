// Arena: one allocation per lifetime (parameters, gradients, optimizer state, activations,
// scratch), carved into aligned views. Only this file's .cc calls cudaMalloc/cudaMallocHost.
// MemoryPlan: the bytes each category will need, computed before anything is allocated, so
// `bin/train --dry-run` can print it and an OOM is reported with numbers before the first step;
// the free memory it is compared with: cuda_memory_info (GPU), host_memory_available (CPU).
#pragma once

#include <cstddef>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tensor.h"
#include "engine/workspace.h"

namespace anvil::engine {

inline constexpr size_t kArenaAlignment = 256;

inline constexpr size_t align_up(size_t n, size_t a = kArenaAlignment) {
  return (n + a - 1) / a * a;
}

class Arena {
 public:
  // Allocates `bytes` on `device` (cudaMalloc on the current CUDA device, aligned host memory on
  // the CPU). ResourceExhausted names the arena and the requested and free bytes.
  static absl::StatusOr<Arena> create(Device device, size_t bytes, std::string name);
  // Page-locked host memory (cudaHostAlloc) for asynchronous host<->device copies, e.g. the
  // optimizer state of parallel/offload_optimizer.h; the views are Device::kCpu.
  static absl::StatusOr<Arena> create_pinned_host(size_t bytes, std::string name);

  Arena() = default;
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena();

  // A contiguous view of `shape`; ResourceExhausted (naming `what`) when the arena is full.
  absl::StatusOr<TensorView> allocate(DType dtype, std::initializer_list<int64_t> shape,
                                      std::string_view what);
  absl::StatusOr<TensorView> allocate(DType dtype, const std::vector<int64_t>& shape,
                                      std::string_view what);
  absl::StatusOr<Workspace> allocate_workspace(size_t bytes, std::string_view what);

  // Scratch use: remember the fill level, later release everything allocated after it.
  size_t mark() const { return used_; }
  void reset(size_t mark) { used_ = mark; }

  Device device() const { return device_; }
  size_t used() const { return used_; }
  size_t capacity() const { return capacity_; }
  const std::string& name() const { return name_; }

 private:
  void release();

  Device device_ = Device::kCpu;
  bool pinned_ = false;  // host memory from cudaHostAlloc
  void* base_ = nullptr;
  size_t capacity_ = 0;
  size_t used_ = 0;
  std::string name_;
};

// Bytes a contiguous tensor takes in an arena (aligned; SIZE_MAX when that overflows).
size_t arena_bytes(DType dtype, const std::vector<int64_t>& shape);

// Byte sums saturate at SIZE_MAX (larger than any memory) instead of wrapping.
class MemoryPlan {
 public:
  struct Entry {
    std::string category;  // "params", "grads", "master", "optimizer", "activations", ...
    std::string name;
    size_t bytes;
  };
  void add(std::string category, std::string name, size_t bytes);
  size_t category_bytes(std::string_view category) const;
  size_t total_bytes() const;
  std::vector<std::string> categories() const;  // in first-added order
  const std::vector<Entry>& entries() const { return entries_; }
  // One line per category with MiB and share, then the total.
  std::string format() const;

 private:
  std::vector<Entry> entries_;
};

// Free and total bytes of the current CUDA device (0, 0 without one).
void cuda_memory_info(size_t* free_bytes, size_t* total_bytes);

// Bytes the kernel estimates can be allocated without swapping: MemAvailable of /proc/meminfo
// (nullopt when the file or the line is missing). parse_mem_available reads that line from the
// text of /proc/meminfo ("MemAvailable:   123456 kB").
std::optional<size_t> host_memory_available();
std::optional<size_t> parse_mem_available(std::string_view meminfo);

}  // namespace anvil::engine
