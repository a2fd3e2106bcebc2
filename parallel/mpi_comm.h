// MpiComm: Comm over MPI for CPU buffers (the CI backend), and the bootstrap channel NCCL needs
// under MPI launchers (its unique id is broadcast over an MpiComm). Every operation is one or more
// nonblocking MPI calls (MPI_Iallreduce, ..., MPI_Isend + MPI_Irecv for batch_p2p) polled with
// MPI_Testall until they complete or the watchdog deadline (CommOptions::timeout_s after the call)
// passes; the call returns when the operation is complete. The communicator uses MPI_ERRORS_RETURN,
// and a failed MPI call aborts all ranks with the decoded error, the operation, the group and the
// rank. MPI counts are ints: one rank's part of an operation may hold at most 2^31 - 1 elements
// (all_reduce splits larger buffers itself).
#pragma once

#include <mpi.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"

namespace anvil::parallel {

class MpiComm : public Comm {
 public:
  // Collective over `parent`: every rank of `parent` calls it, members of `group` or not
  // (color = group.id, key = group.index, so MPI ranks in the new communicator equal group
  // positions). Non-members get nullptr. `global_rank` names this process in messages.
  static absl::StatusOr<std::unique_ptr<MpiComm>> create(MPI_Comm parent, const ProcessGroup& group,
                                                         int global_rank,
                                                         const CommOptions& options);
  ~MpiComm() override;

  engine::Device device() const override { return engine::Device::kCpu; }
  MPI_Comm mpi_comm() const { return comm_; }

  void all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) override;
  void reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) override;
  void all_gather(TensorView recv, ConstTensorView send, Stream& s) override;
  void broadcast(TensorView buf, int root, Stream& s) override;
  void send(ConstTensorView buf, int peer, Stream& s) override;
  void recv(TensorView buf, int peer, Stream& s) override;
  // MPI_Isend/MPI_Irecv for every op (tag 0, as send/recv), then one watchdog wait for all.
  void batch_p2p(const std::vector<P2pOp>& ops, Stream& s) override;
  void barrier(Stream& s) override;
  using Comm::all_reduce;

 private:
  MpiComm(ProcessGroup group, int global_rank, CommOptions options, MPI_Comm comm)
      : Comm(std::move(group), global_rank, std::move(options)), comm_(comm) {}
  // Aborts all ranks naming `op` when an MPI call failed.
  void check(int mpi_error, const char* op, const char* call) const;
  // Polls `count` requests until all have completed; the watchdog fires after timeout_s.
  void wait(MPI_Request* reqs, int count, const char* op, const std::string& what);
  void wait(MPI_Request* req, const char* op, const std::string& what) { wait(req, 1, op, what); }

  MPI_Comm comm_ = MPI_COMM_NULL;
  uint64_t seq_ = 0;  // operations issued, for messages
};

// The communicators of a grid's groups over MPI. Every rank calls create_mpi_group_comms
// together (collective over MPI_COMM_WORLD); `embedding` is null on ranks outside it.
absl::StatusOr<GroupComms> create_mpi_group_comms(const ProcessGrid& grid,
                                                  const CommOptions& options);

}  // namespace anvil::parallel
