// DataParallel: bucketed in-place all-reduce of the flat gradient buffer over the DP group, on a
// communication stream ordered by events (see data_parallel.h).
#include "parallel/data_parallel.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "engine/memory.h"
#include "engine/status.h"
#include "parallel/scalar_reduce.h"

namespace anvil::parallel {

using engine::DType;

std::vector<Bucket> plan_buckets(int64_t numel, int64_t bucket_elems, int64_t align) {
  ANVIL_CHECK_MSG(numel >= 0 && align >= 1,
                  absl::StrCat("plan_buckets: numel ", numel, ", align ", align));
  std::vector<Bucket> out;
  if (numel == 0) return out;
  int64_t size = numel;
  if (bucket_elems > 0) size = std::max<int64_t>(bucket_elems / align, 1) * align;
  for (int64_t begin = 0; begin < numel; begin += size) {
    out.push_back(Bucket{begin, std::min(begin + size, numel)});
  }
  return out;
}

absl::StatusOr<std::unique_ptr<DataParallel>> DataParallel::create(
    TensorView grads, Comm* comm, const DataParallelOptions& options) {
  if (comm == nullptr) return absl::InvalidArgumentError("DataParallel: no DP communicator");
  if (grads.dtype != DType::kF32 && grads.dtype != DType::kF64) {
    return absl::InvalidArgumentError(
        absl::StrCat("DataParallel: gradients must be f32 (or f64 in CPU tests), got ",
                     engine::describe(grads)));
  }
  if (grads.device != comm->device() || !grads.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "DataParallel: gradient buffer ", engine::describe(grads), " must be contiguous on ",
        std::string(engine::device_name(comm->device())), ", the DP communicator's device"));
  }
  std::unique_ptr<DataParallel> dp(new DataParallel());
  dp->grads_ = grads;
  dp->comm_ = comm;
  // 64-element boundaries keep every bucket 256-byte aligned, as the parameters are.
  dp->buckets_ = plan_buckets(grads.numel(), options.bucket_elems, 64);
  if (comm->device() == engine::Device::kCuda) {
    ANVIL_ASSIGN_OR_RETURN(engine::Stream s, engine::Stream::cuda(options.cuda_device));
    dp->comm_stream_ = std::make_unique<engine::Stream>(std::move(s));
    ANVIL_ASSIGN_OR_RETURN(engine::Event ready, engine::Event::create());
    ANVIL_ASSIGN_OR_RETURN(engine::Event done, engine::Event::create());
    dp->ready_ = std::make_unique<engine::Event>(std::move(ready));
    dp->done_ = std::make_unique<engine::Event>(std::move(done));
    ANVIL_ASSIGN_OR_RETURN(dp->scratch_,
                           engine::Arena::create(engine::Device::kCuda, engine::kArenaAlignment,
                                                 "data-parallel scalar"));
    ANVIL_ASSIGN_OR_RETURN(dp->scalar_, dp->scratch_.allocate(DType::kF64, {1}, "dp scalar"));
  }
  return dp;
}

DataParallel::~DataParallel() {
  // Outstanding collectives read and write the gradient buffer: let them finish first.
  if (comm_stream_) comm_stream_->synchronize();
}

engine::Stream& DataParallel::after(engine::Stream& compute) {
  if (!comm_stream_) return compute;
  ready_->record(compute);
  ready_->wait(*comm_stream_);
  return *comm_stream_;
}

void DataParallel::reduce_early(int64_t begin, int64_t end, engine::Stream& compute) {
  ANVIL_CHECK_MSG(
      begin >= 0 && begin <= end && end <= grads_.numel(),
      absl::StrCat("DataParallel::reduce_early: [", begin, ", ", end, ") of ", grads_.numel()));
  if (end == begin) return;
  comm_->all_reduce(engine::slice_rows(grads_, begin, end), ReduceOp::kSum, after(compute));
  early_.push_back(Bucket{begin, end});
}

void DataParallel::start_grad_sync(engine::Stream& compute) {
  engine::Stream& s = after(compute);
  std::sort(early_.begin(), early_.end(),
            [](const Bucket& a, const Bucket& b) { return a.begin < b.begin; });
  // Back to front (the order a layer-wise backward completes them), skipping early ranges.
  for (auto it = buckets_.rbegin(); it != buckets_.rend(); ++it) {
    int64_t at = it->begin;
    std::vector<Bucket> rest;
    for (const Bucket& e : early_) {
      if (e.end <= at || e.begin >= it->end) continue;
      if (e.begin > at) rest.push_back({at, e.begin});
      at = std::max(at, e.end);
    }
    if (at < it->end) rest.push_back({at, it->end});
    for (const Bucket& r : rest) {
      comm_->all_reduce(engine::slice_rows(grads_, r.begin, r.end), ReduceOp::kSum, s);
    }
  }
  early_.clear();
  if (comm_stream_) done_->record(*comm_stream_);
}

void DataParallel::finish_grad_sync(engine::Stream& compute) {
  if (comm_stream_) done_->wait(compute);
}

double DataParallel::sum(double local, engine::Stream& compute) {
  return all_reduce_scalar(*comm_, local, ReduceOp::kSum, scalar_, compute);
}

}  // namespace anvil::parallel
