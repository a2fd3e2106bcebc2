// Arena allocation (the only cudaMalloc in anvil), the MemoryPlan report and the free GPU and
// host memory the plan is compared with.
#include "engine/arena.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/checked_math.h"
#include "engine/status.h"

namespace anvil::engine {

absl::StatusOr<Arena> Arena::create(Device device, size_t bytes, std::string name) {
  Arena a;
  a.device_ = device;
  a.name_ = std::move(name);
  a.capacity_ = align_up(bytes);
  if (a.capacity_ == 0) return a;
  if (device == Device::kCuda) {
    cudaError_t err = cudaMalloc(&a.base_, a.capacity_);
    if (err != cudaSuccess) {
      (void)cudaGetLastError();
      size_t free_b = 0, total_b = 0;
      cuda_memory_info(&free_b, &total_b);
      a.base_ = nullptr;
      return absl::ResourceExhaustedError(
          absl::StrFormat("arena '%s': cudaMalloc of %d bytes (%.2f GiB) failed: %s; device has "
                          "%.2f GiB free of %.2f GiB",
                          a.name_, a.capacity_, a.capacity_ / 1073741824.0, cudaGetErrorString(err),
                          free_b / 1073741824.0, total_b / 1073741824.0));
    }
  } else {
    a.base_ = std::aligned_alloc(kArenaAlignment, a.capacity_);
    if (a.base_ == nullptr) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("arena '%s': host allocation of %d bytes failed", a.name_, a.capacity_));
    }
  }
  return a;
}

Arena::Arena(Arena&& o) noexcept { *this = std::move(o); }

Arena& Arena::operator=(Arena&& o) noexcept {
  if (this != &o) {
    release();
    device_ = o.device_;
    pinned_ = std::exchange(o.pinned_, false);
    base_ = std::exchange(o.base_, nullptr);
    capacity_ = std::exchange(o.capacity_, 0);
    used_ = std::exchange(o.used_, 0);
    name_ = std::move(o.name_);
  }
  return *this;
}

absl::StatusOr<Arena> Arena::create_pinned_host(size_t bytes, std::string name) {
  Arena a;
  a.device_ = Device::kCpu;
  a.pinned_ = true;
  a.name_ = std::move(name);
  a.capacity_ = align_up(bytes);
  if (a.capacity_ == 0) return a;
  const cudaError_t err = cudaHostAlloc(&a.base_, a.capacity_, cudaHostAllocDefault);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    a.base_ = nullptr;
    return absl::ResourceExhaustedError(
        absl::StrFormat("arena '%s': cudaHostAlloc of %d bytes (%.2f GiB) of pinned host memory "
                        "failed: %s",
                        a.name_, a.capacity_, a.capacity_ / 1073741824.0, cudaGetErrorString(err)));
  }
  return a;
}

Arena::~Arena() { release(); }

void Arena::release() {
  if (base_ == nullptr) return;
  if (device_ == Device::kCuda) {
    cudaFree(base_);
  } else if (pinned_) {
    cudaFreeHost(base_);
  } else {
    std::free(base_);
  }
  base_ = nullptr;
}

absl::StatusOr<Workspace> Arena::allocate_workspace(size_t bytes, std::string_view what) {
  const size_t need = align_up(bytes);
  if (used_ + need > capacity_) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("arena '%s' full: '%s' needs %d bytes, %d of %d used", name_, what, need,
                        used_, capacity_));
  }
  Workspace ws{static_cast<char*>(base_) + used_, bytes};
  used_ += need;
  return ws;
}

absl::StatusOr<TensorView> Arena::allocate(DType dtype, const std::vector<int64_t>& shape,
                                           std::string_view what) {
  if (shape.size() > kMaxDims) return absl::InvalidArgumentError("more than 4 dims");
  TensorView v;
  v.dtype = dtype;
  v.device = device_;
  v.ndim = static_cast<int>(shape.size());
  int64_t stride = 1;
  for (int d = v.ndim - 1; d >= 0; --d) {
    v.shape[d] = shape[d];
    v.strides[d] = stride;
    stride *= shape[d];
  }
  ANVIL_ASSIGN_OR_RETURN(Workspace ws, allocate_workspace(v.bytes(), what));
  v.data = ws.data;
  return v;
}

absl::StatusOr<TensorView> Arena::allocate(DType dtype, std::initializer_list<int64_t> shape,
                                           std::string_view what) {
  return allocate(dtype, std::vector<int64_t>(shape), what);
}

size_t arena_bytes(DType dtype, const std::vector<int64_t>& shape) {
  size_t n = dtype_size(dtype);
  for (int64_t s : shape) n = saturating_mul(n, static_cast<size_t>(s));
  return n > SIZE_MAX - kArenaAlignment ? SIZE_MAX : align_up(n);
}

void MemoryPlan::add(std::string category, std::string name, size_t bytes) {
  entries_.push_back({std::move(category), std::move(name), bytes});
}

size_t MemoryPlan::category_bytes(std::string_view category) const {
  size_t n = 0;
  for (const Entry& e : entries_) {
    if (e.category == category) n = saturating_add(n, e.bytes);
  }
  return n;
}

size_t MemoryPlan::total_bytes() const {
  size_t n = 0;
  for (const Entry& e : entries_) n = saturating_add(n, e.bytes);
  return n;
}

std::vector<std::string> MemoryPlan::categories() const {
  std::vector<std::string> out;
  for (const Entry& e : entries_) {
    bool seen = false;
    for (const std::string& c : out) seen = seen || c == e.category;
    if (!seen) out.push_back(e.category);
  }
  return out;
}

std::string MemoryPlan::format() const {
  const double total = static_cast<double>(total_bytes());
  std::string out;
  for (const std::string& c : categories()) {
    const size_t b = category_bytes(c);
    absl::StrAppendFormat(&out, "  %-12s %12.1f MiB  %5.1f%%\n", c, b / 1048576.0,
                          total > 0 ? 100.0 * b / total : 0.0);
  }
  absl::StrAppendFormat(&out, "  %-12s %12.1f MiB\n", "total", total / 1048576.0);
  return out;
}

void cuda_memory_info(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = 0;
  *total_bytes = 0;
  if (cudaMemGetInfo(free_bytes, total_bytes) != cudaSuccess) {
    (void)cudaGetLastError();
    *free_bytes = 0;
    *total_bytes = 0;
  }
}

std::optional<size_t> parse_mem_available(std::string_view meminfo) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::string key, unit, extra;
    uint64_t kib = 0;
    if (!(words >> key) || key != "MemAvailable:") continue;
    if (!(words >> kib >> unit) || unit != "kB" || (words >> extra)) return std::nullopt;
    return saturating_mul(kib, 1024);
  }
  return std::nullopt;
}

std::optional<size_t> host_memory_available() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace anvil::engine
