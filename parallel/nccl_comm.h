// NcclComm: Comm over NCCL for CUDA buffers. Operations are enqueued on the caller's stream and
// return at once; order them against other streams with engine::Event (a communication stream
// waits for the event that marks its input ready, the compute stream waits for the event after
// the collective). Nothing here synchronizes the device.
//
// Bootstrap: group rank 0 calls ncclGetUniqueId and delivers the id to the other members through
// a BroadcastBytes (bootstrap.h): over a CPU communicator of the same group (MpiComm under
// mpirun / srun) or through the rendezvous store (torchrun); both work across nodes and need no
// shared filesystem. ncclCommInitRank follows. A group of one needs no bootstrap (single-GPU
// runs through the same code path), but uses one when given.
//
// Watchdog: each operation is bracketed by two CUDA events. A thread polls them: once the first
// has completed the operation is running, and if the second has not completed timeout_s later
// it calls CommOptions::on_timeout (default: abort all ranks) with a message naming the
// operation, group and rank. The thread also reports NCCL's asynchronous errors
// (ncclCommGetAsyncError) and aborts all ranks.
//
// Environment: NCCL reads its own variables (NCCL_DEBUG, NCCL_SOCKET_IFNAME, NCCL_NVLS_ENABLE,
// ...); anvil sets none of them. Runs on the H200 machines set NCCL_NVLS_ENABLE=0 (NVLink
// SHARP multicast is not available there; see docs/parallelism.md).
#pragma once

#include <nccl.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/arena.h"
#include "parallel/bootstrap.h"
#include "parallel/comm.h"
#include "parallel/grid.h"

namespace anvil::parallel {

class NcclComm : public Comm {
 public:
  // Called together by the members of `group` with the CUDA device of this rank current.
  // `bootstrap` delivers the unique id; may be empty only when the group has one rank.
  static absl::StatusOr<std::unique_ptr<NcclComm>> create(const ProcessGroup& group,
                                                          int global_rank,
                                                          const BroadcastBytes& bootstrap,
                                                          const CommOptions& options);
  // The same over `bootstrap`, a CPU communicator of the same group (same size and positions;
  // MpiComm or TcpComm), or null for a group of one.
  static absl::StatusOr<std::unique_ptr<NcclComm>> create(const ProcessGroup& group,
                                                          int global_rank, Comm* bootstrap,
                                                          const CommOptions& options);
  // Stops the watchdog, then ncclCommFinalize + ncclCommDestroy. The caller must have
  // synchronized the streams its operations ran on.
  ~NcclComm() override;

  engine::Device device() const override { return engine::Device::kCuda; }
  ncclComm_t nccl_comm() const { return comm_; }

  void all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) override;
  void reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) override;
  void all_gather(TensorView recv, ConstTensorView send, Stream& s) override;
  void broadcast(TensorView buf, int root, Stream& s) override;
  void send(ConstTensorView buf, int peer, Stream& s) override;
  void recv(TensorView buf, int peer, Stream& s) override;
  // ncclGroupStart, ncclSend/ncclRecv per op, ncclGroupEnd: one watched operation on `s`.
  void batch_p2p(const std::vector<P2pOp>& ops, Stream& s) override;
  void barrier(Stream& s) override;
  using Comm::all_reduce;

 private:
  class Watchdog;
  NcclComm(ProcessGroup group, int global_rank, CommOptions options);
  // Aborts all ranks with NCCL's decoded error when `result` is not ncclSuccess.
  void check(ncclResult_t result, const char* op, const char* call) const;
  // Runs `launch` (one NCCL call) between the watchdog's two events on `s`.
  template <typename Launch>
  void guarded(const char* op, const std::string& what, Stream& s, Launch&& launch);

  ncclComm_t comm_ = nullptr;
  engine::Arena scratch_;  // [1] f32 on the device: the barrier's all-reduce
  engine::TensorView barrier_buf_;
  std::unique_ptr<Watchdog> watchdog_;
  uint64_t seq_ = 0;
};

}  // namespace anvil::parallel
