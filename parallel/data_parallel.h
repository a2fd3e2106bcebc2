// Data parallelism (DESIGN.md §5, Megatron's DistributedDataParallel with a contiguous grad
// buffer): every DP rank holds the whole model and a flat f32 gradient buffer; after the last
// micro-batch's backward of a step the buffer is summed over the DP group in buckets, once per
// step (gradient accumulation across micro-batches happens locally in the buffer first).
//
// Scaling: each rank's backward already scales by 1 / (global tokens of the step), so the SUM
// over ranks is the gradient of the mean loss of the global batch; no division by dp follows.
//
// Samples (Megatron's pretraining sampler): step s consumes samples [s*G, (s+1)*G) of the train
// stream in chunks of micro_batch * dp; chunk m goes to the ranks in order, DP rank r taking
// rows [r*B, (r+1)*B) of it as its micro-batch m. With dp = 1 this is the single-rank order, and
// DP rank r's micro-batch m holds exactly the samples of the single-rank micro-batch m*dp + r,
// so numbering dropout by that global micro-batch index replays the single-rank masks too.
//
// Streams (CUDA): the reductions run on a communication stream of their own. start_grad_sync
// records an event on the compute stream that the communication stream waits for, then enqueues
// every bucket's all-reduce there; finish_grad_sync makes the compute stream wait for an event
// recorded after the last one. No host or device synchronization. Overlap with the backward:
// reduce_early(begin, end) launches the all-reduce of a range as soon as the backward has
// finished it (parallel/grad_sync.h, which owns this class for plain DP, reports each layer's
// bucket during the last micro-batch's backward);
// start_grad_sync then reduces only what was not reduced early. On the CPU (MpiComm, TcpComm) the
// reductions complete inside these calls.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "parallel/comm.h"

namespace anvil::parallel {

// The train-stream index of row b of micro-batch m on DP rank dp_rank in step `step` (from 0).
inline int64_t dp_sample_index(int64_t step, int64_t global_batch, int64_t micro_batch, int dp,
                               int dp_rank, int64_t m, int64_t b) {
  return step * global_batch + (m * dp + dp_rank) * micro_batch + b;
}

// [begin, end) element range of the flat buffer.
struct Bucket {
  int64_t begin = 0, end = 0;
  int64_t numel() const { return end - begin; }
};

// Splits [0, numel) into consecutive buckets of at most max(bucket_elems, align) elements
// (bucket_elems <= 0: one bucket), every boundary but the last a multiple of `align`.
std::vector<Bucket> plan_buckets(int64_t numel, int64_t bucket_elems, int64_t align);

struct DataParallelOptions {
  int64_t bucket_elems = 25'000'000;  // f32 elements per all-reduce (100 MiB)
  int cuda_device = 0;                // for the communication stream (CUDA comms only)
};

class DataParallel {
 public:
  // grads: the flat f32 gradient buffer [n] on comm->device(); comm: the DP group's Comm (not
  // owned, must outlive this object).
  static absl::StatusOr<std::unique_ptr<DataParallel>> create(TensorView grads, Comm* comm,
                                                              const DataParallelOptions& options);
  ~DataParallel();

  int size() const { return comm_->size(); }
  int rank() const { return comm_->index(); }
  Comm& comm() { return *comm_; }
  const std::vector<Bucket>& buckets() const { return buckets_; }

  // grads[begin, end) = sum over the DP group, launched now after the work queued on compute.
  void reduce_early(int64_t begin, int64_t end, engine::Stream& compute);
  // grads = sum over the DP group of grads, bucket by bucket (see the file comment), except the
  // ranges reduced early in this step.
  void start_grad_sync(engine::Stream& compute);
  void finish_grad_sync(engine::Stream& compute);

  // Sum of a host value over the group (losses, token counts). Synchronizes `compute` on CUDA.
  double sum(double local, engine::Stream& compute);

 private:
  DataParallel() = default;
  // The stream to reduce on, ordered after the work queued on compute so far.
  engine::Stream& after(engine::Stream& compute);

  TensorView grads_;
  Comm* comm_ = nullptr;
  std::vector<Bucket> buckets_;
  std::vector<Bucket> early_;                    // ranges reduced early in this step
  std::unique_ptr<engine::Stream> comm_stream_;  // CUDA only
  std::unique_ptr<engine::Event> ready_, done_;  // CUDA only
  engine::Arena scratch_;                        // CUDA only: the scalar of sum()
  TensorView scalar_;                            // [1] f64 on the device
};

}  // namespace anvil::parallel
