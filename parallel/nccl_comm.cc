// NcclComm: NCCL collectives on the caller's stream, the unique id's bootstrap, and the
// event-polling watchdog thread (see nccl_comm.h).
#include "parallel/nccl_comm.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <list>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/cuda_check.h"
#include "engine/log.h"
#include "engine/status.h"

namespace anvil::parallel {
namespace {

using Clock = std::chrono::steady_clock;
using engine::DType;

// NCCL's type for a reduction over `dtype`, or false when NCCL cannot reduce it.
bool reduce_type(DType dtype, ncclDataType_t* out) {
  switch (dtype) {
    case DType::kF32:
      *out = ncclFloat32;
      return true;
    case DType::kF64:
      *out = ncclFloat64;
      return true;
    case DType::kBF16:
      *out = ncclBfloat16;
      return true;
    case DType::kF16:
      *out = ncclFloat16;
      return true;
    case DType::kI32:
      *out = ncclInt32;
      return true;
    case DType::kI64:
      *out = ncclInt64;
      return true;
    default:
      return false;
  }
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::kSum ? ncclSum : ncclMax; }

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

}  // namespace

// Polls the bracketing events of enqueued operations (see nccl_comm.h). Events are created by
// the launching thread and recycled through a free list once both have completed.
class NcclComm::Watchdog {
 public:
  Watchdog(NcclComm* owner, int device) : owner_(owner), device_(device) {
    thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
    for (Op& op : pending_) {
      cudaEventDestroy(op.start);
      cudaEventDestroy(op.end);
    }
    for (cudaEvent_t e : free_) cudaEventDestroy(e);
  }

  cudaEvent_t take_event() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        cudaEvent_t e = free_.back();
        free_.pop_back();
        return e;
      }
    }
    cudaEvent_t e = nullptr;
    ANVIL_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    return e;
  }

  void watch(uint64_t seq, const char* op, std::string what, cudaEvent_t start, cudaEvent_t end) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.push_back(Op{seq, op, std::move(what), start, end, false, {}, {}});
  }

 private:
  struct Op {
    uint64_t seq;
    const char* name;
    std::string what;
    cudaEvent_t start, end;
    bool started;
    Clock::time_point started_at, fire_at;
  };

  // Polling period: coarse against any sane timeout, cheap (a few cudaEventQuery per tick).
  static constexpr std::chrono::milliseconds kTick{20};

  void loop() {
    // Event queries need this device's context on this thread.
    cudaError_t err = cudaSetDevice(device_);
    if (err != cudaSuccess) {
      abort_all_ranks(owner_->global_rank_, absl::StrCat("NcclComm watchdog: cudaSetDevice(",
                                                         device_, "): ", cudaGetErrorString(err)));
    }
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      poll_async_error();
      const Clock::time_point now = Clock::now();
      for (auto it = pending_.begin(); it != pending_.end();) {
        Op& op = *it;
        const cudaError_t end = cudaEventQuery(op.end);
        if (end == cudaSuccess) {
          free_.push_back(op.start);
          free_.push_back(op.end);
          it = pending_.erase(it);
          continue;
        }
        if (end != cudaErrorNotReady) fatal_cuda(op, end);
        if (!op.started) {
          const cudaError_t start = cudaEventQuery(op.start);
          if (start == cudaSuccess) {
            op.started = true;
            op.started_at = now;
            op.fire_at = now + seconds(owner_->options_.timeout_s);
          } else if (start != cudaErrorNotReady) {
            fatal_cuda(op, start);
          }
        }
        if (op.started && now >= op.fire_at) {
          const std::string msg = owner_->timeout_message(
              op.name, op.seq, op.what, std::chrono::duration<double>(now - op.started_at).count());
          op.fire_at = now + seconds(owner_->options_.timeout_s);
          // The default hook never returns; a test hook may, and must not run under the lock.
          lock.unlock();
          owner_->on_timeout(msg);
          lock.lock();
          break;  // the list may have changed while unlocked: rescan on the next tick
        }
        ++it;
      }
      cv_.wait_for(lock, kTick, [this] { return stop_; });
    }
  }

  void poll_async_error() {
    ncclResult_t async = ncclSuccess;
    if (ncclCommGetAsyncError(owner_->comm_, &async) != ncclSuccess) return;
    if (async == ncclSuccess || async == ncclInProgress) return;
    abort_all_ranks(owner_->global_rank_,
                    absl::StrFormat("NCCL asynchronous error on the %s (global rank %d): %s "
                                    "(%s); aborting all ranks",
                                    owner_->group_.describe(), owner_->global_rank_,
                                    ncclGetErrorString(async), ncclGetLastError(owner_->comm_)));
  }

  [[noreturn]] void fatal_cuda(const Op& op, cudaError_t err) {
    abort_all_ranks(owner_->global_rank_,
                    absl::StrFormat("NcclComm watchdog: %s #%d (%s) on the %s: CUDA error %s: %s",
                                    op.name, op.seq, op.what, owner_->group_.describe(),
                                    cudaGetErrorName(err), cudaGetErrorString(err)));
  }

  NcclComm* owner_;
  int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::list<Op> pending_;
  std::vector<cudaEvent_t> free_;
  std::thread thread_;
};

NcclComm::NcclComm(ProcessGroup group, int global_rank, CommOptions options)
    : Comm(std::move(group), global_rank, std::move(options)) {}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::create(const ProcessGroup& group,
                                                           int global_rank, Comm* bootstrap,
                                                           const CommOptions& options) {
  if (bootstrap != nullptr &&
      (bootstrap->size() != group.size() || bootstrap->index() != group.index ||
       bootstrap->device() != engine::Device::kCpu)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "NcclComm::create: bootstrap %s (this rank at %d, %s) does not match the %s (at %d) or "
        "is not a CPU communicator",
        bootstrap->group().describe(), bootstrap->index(),
        std::string(engine::device_name(bootstrap->device())), group.describe(), group.index));
  }
  return create(group, global_rank,
                bootstrap != nullptr ? broadcast_over(*bootstrap) : BroadcastBytes(), options);
}

absl::StatusOr<std::unique_ptr<NcclComm>> NcclComm::create(const ProcessGroup& group,
                                                           int global_rank,
                                                           const BroadcastBytes& bootstrap,
                                                           const CommOptions& options) {
  if (!group.is_member()) {
    return absl::InvalidArgumentError(absl::StrCat("NcclComm::create: global rank ", global_rank,
                                                   " is not in the ", group.describe()));
  }
  if (!bootstrap && group.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat("NcclComm::create: the ", group.describe(),
                                                   " needs a bootstrap (MPI or the store)"));
  }
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return absl::FailedPreconditionError("NcclComm::create: no current CUDA device");
  }

  ncclUniqueId id;
  if (group.index == 0) {
    const ncclResult_t r = ncclGetUniqueId(&id);
    if (r != ncclSuccess) {
      return absl::InternalError(absl::StrCat("ncclGetUniqueId: ", ncclGetErrorString(r)));
    }
  }
  if (bootstrap) ANVIL_RETURN_IF_ERROR(bootstrap(&id, sizeof(id)));

  std::unique_ptr<NcclComm> c(new NcclComm(group, global_rank, options));
  const ncclResult_t r = ncclCommInitRank(&c->comm_, group.size(), id, group.index);
  if (r != ncclSuccess) {
    c->comm_ = nullptr;
    return absl::InternalError(
        absl::StrFormat("ncclCommInitRank for the %s (global rank %d, CUDA device %d): %s",
                        group.describe(), global_rank, device, ncclGetErrorString(r)));
  }
  ANVIL_ASSIGN_OR_RETURN(c->scratch_,
                         engine::Arena::create(engine::Device::kCuda, engine::kArenaAlignment,
                                               absl::StrCat("nccl ", group.name, " barrier")));
  ANVIL_ASSIGN_OR_RETURN(c->barrier_buf_,
                         c->scratch_.allocate(DType::kF32, {1}, "barrier scratch"));
  c->watchdog_ = std::make_unique<Watchdog>(c.get(), device);
  return c;
}

NcclComm::~NcclComm() {
  watchdog_.reset();  // stop polling before the communicator goes away
  if (comm_ != nullptr) {
    ncclCommFinalize(comm_);
    ncclCommDestroy(comm_);
  }
}

void NcclComm::check(ncclResult_t result, const char* op, const char* call) const {
  if (result == ncclSuccess) return;
  abort_all_ranks(global_rank_, absl::StrFormat("NcclComm %s on the %s: %s failed: %s (%s)", op,
                                                group_.describe(), call, ncclGetErrorString(result),
                                                ncclGetLastError(comm_)));
}

template <typename Launch>
void NcclComm::guarded(const char* op, const std::string& what, Stream& s, Launch&& launch) {
  ANVIL_CHECK_MSG(s.is_cuda(), absl::StrCat("NcclComm::", op, " needs a CUDA stream"));
  const uint64_t seq = ++seq_;
  cudaEvent_t start = watchdog_->take_event();
  cudaEvent_t end = watchdog_->take_event();
  ANVIL_CUDA_CHECK(cudaEventRecord(start, s.cuda_stream()));
  launch(s.cuda_stream());
  ANVIL_CUDA_CHECK(cudaEventRecord(end, s.cuda_stream()));
  watchdog_->watch(seq, op, what, start, end);
}

void NcclComm::all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) {
  check_views("all_reduce", recv, send, 1, 1);
  ncclDataType_t type;
  ANVIL_CHECK_MSG(
      reduce_type(send.dtype, &type),
      absl::StrCat("NcclComm::all_reduce: NCCL cannot reduce ", engine::describe(send)));
  guarded("all_reduce", absl::StrCat(reduce_op_name(op), " of ", describe_buffer(send)), s,
          [&](cudaStream_t st) {
            check(ncclAllReduce(send.data, recv.data, static_cast<size_t>(send.numel()), type,
                                nccl_op(op), comm_, st),
                  "all_reduce", "ncclAllReduce");
          });
}

void NcclComm::reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) {
  check_views("reduce_scatter", recv, send, 1, size());
  ncclDataType_t type;
  ANVIL_CHECK_MSG(
      reduce_type(send.dtype, &type),
      absl::StrCat("NcclComm::reduce_scatter: NCCL cannot reduce ", engine::describe(send)));
  // In place when recv is this rank's slice of send: NCCL's own convention.
  guarded("reduce_scatter", absl::StrCat(reduce_op_name(op), " of ", describe_buffer(send)), s,
          [&](cudaStream_t st) {
            check(ncclReduceScatter(send.data, recv.data, static_cast<size_t>(recv.numel()), type,
                                    nccl_op(op), comm_, st),
                  "reduce_scatter", "ncclReduceScatter");
          });
}

void NcclComm::all_gather(TensorView recv, ConstTensorView send, Stream& s) {
  check_views("all_gather", recv, send, size(), 1);
  // Moved as bytes: any dtype. In place when send is this rank's slice of recv.
  guarded("all_gather", describe_buffer(send), s, [&](cudaStream_t st) {
    check(ncclAllGather(send.data, recv.data, send.bytes(), ncclUint8, comm_, st), "all_gather",
          "ncclAllGather");
  });
}

void NcclComm::broadcast(TensorView buf, int root, Stream& s) {
  check_views("broadcast", buf, buf, 1, 1);
  ANVIL_CHECK_MSG(
      root >= 0 && root < size(),
      absl::StrFormat("NcclComm::broadcast: root %d outside the %s", root, group_.describe()));
  guarded("broadcast", absl::StrCat(describe_buffer(buf), " from group rank ", root), s,
          [&](cudaStream_t st) {
            check(ncclBroadcast(buf.data, buf.data, buf.bytes(), ncclUint8, root, comm_, st),
                  "broadcast", "ncclBroadcast");
          });
}

void NcclComm::send(ConstTensorView buf, int peer, Stream& s) {
  check_views("send", buf, buf, 1, 1);
  check_peer("send", peer);
  guarded("send", absl::StrCat(describe_buffer(buf), " to group rank ", peer), s,
          [&](cudaStream_t st) {
            check(ncclSend(buf.data, buf.bytes(), ncclUint8, peer, comm_, st), "send", "ncclSend");
          });
}

void NcclComm::recv(TensorView buf, int peer, Stream& s) {
  check_views("recv", buf, buf, 1, 1);
  check_peer("recv", peer);
  guarded("recv", absl::StrCat(describe_buffer(buf), " from group rank ", peer), s,
          [&](cudaStream_t st) {
            check(ncclRecv(buf.data, buf.bytes(), ncclUint8, peer, comm_, st), "recv", "ncclRecv");
          });
}

void NcclComm::batch_p2p(const std::vector<P2pOp>& ops, Stream& s) {
  ANVIL_CHECK_MSG(s.is_cuda(), "NcclComm::batch_p2p needs a CUDA stream");
  check_p2p_ops(ops);
  if (ops.empty()) return;
  // One NCCL group: the transfers progress together, so their order cannot deadlock.
  guarded("batch_p2p", describe_p2p_ops(ops), s, [&](cudaStream_t st) {
    check(ncclGroupStart(), "batch_p2p", "ncclGroupStart");
    for (const P2pOp& o : ops) {
      if (o.send) {
        check(ncclSend(o.buf.data, o.buf.bytes(), ncclUint8, o.peer, comm_, st), "batch_p2p",
              "ncclSend");
      } else {
        check(ncclRecv(o.buf.data, o.buf.bytes(), ncclUint8, o.peer, comm_, st), "batch_p2p",
              "ncclRecv");
      }
    }
    check(ncclGroupEnd(), "batch_p2p", "ncclGroupEnd");
  });
}

void NcclComm::barrier(Stream& s) {
  // NCCL has no barrier: a one-element all-reduce completes on no rank before all have joined.
  guarded("barrier", "no data", s, [&](cudaStream_t st) {
    check(ncclAllReduce(barrier_buf_.data, barrier_buf_.data, 1, ncclFloat32, ncclSum, comm_, st),
          "barrier", "ncclAllReduce");
  });
}

}  // namespace anvil::parallel
