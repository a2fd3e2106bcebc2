// TcpComm: Comm over TCP sockets for CPU buffers, without MPI (runs started by torchrun or the
// deepspeed launcher). Same semantics, dtypes and watchdog as MpiComm (comm.h):
//   - Connections: every pair of group members has one TCP connection, made when the
//     communicator is created: each member listens on an ephemeral port, publishes
//     "host:port" in the rendezvous store (tcp_store.h) and connects to the members after it;
//     the store carries nothing else. A rank holds size() - 1 sockets per group (world - 1 for
//     the world group): thousands of ranks need a raised `ulimit -n`.
//   - Messages: a 16-byte header (magic, operation kind, bytes) before each payload, so ranks
//     that called different operations or sizes fail with a message naming both instead of
//     exchanging garbage. Between two ranks, messages in one direction arrive in order.
//   - Progress: an operation posts all its transfers at once and drives them through
//     non-blocking sockets with poll(), so exchanges in both directions (batch_p2p, the
//     collectives) cannot deadlock on full socket buffers.
//   - Reductions (all_reduce = reduce_scatter + all_gather over P near-equal chunks; group rank
//     r owns chunk r): the owner sums its chunk's contributions in group-rank order
//     ((x_0 + x_1) + x_2) + ..., so every rank holds bitwise the same result, and a run is
//     reproducible. f32, f64, i32, i64 like MpiComm (CHECK-fails otherwise).
//   - broadcast: the root sends to every member; barrier: members report to group rank 0,
//     which releases them.
//   - send returns once the payload is handed to the kernel (like MPI's eager sends of small
//     messages); as with MpiComm, two ranks must not both send() first a payload larger than
//     the socket buffers (use batch_p2p).
// Watchdog: an operation not complete timeout_s after it started calls
// CommOptions::on_timeout (default: abort_all_ranks). A peer whose connection fails (it
// exited, crashed or aborted) ends this rank at once via abort_all_ranks with a message naming
// the operation, the group and the peer: without MPI there is no job-wide abort, so each rank
// ends itself and its own peers then see its connections close, until the whole job is gone
// (torchrun also stops the other workers when one fails).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/tcp_socket.h"
#include "parallel/tcp_store.h"

namespace anvil::parallel {

class TcpComm : public Comm {
 public:
  // Called together by the members of `group`, in the same order for all communicators of the
  // group; non-members get nullptr. `store` may be null only when the group has one rank.
  // Errors (DeadlineExceeded / Unavailable) name the group, the peer and its address when a
  // member does not show up within the store's timeout.
  static absl::StatusOr<std::unique_ptr<TcpComm>> create(const ProcessGroup& group, int global_rank,
                                                         TcpStore* store,
                                                         const CommOptions& options);

  engine::Device device() const override { return engine::Device::kCpu; }

  void all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) override;
  void reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) override;
  void all_gather(TensorView recv, ConstTensorView send, Stream& s) override;
  void broadcast(TensorView buf, int root, Stream& s) override;
  void send(ConstTensorView buf, int peer, Stream& s) override;
  void recv(TensorView buf, int peer, Stream& s) override;
  void batch_p2p(const std::vector<P2pOp>& ops, Stream& s) override;
  void barrier(Stream& s) override;
  using Comm::all_reduce;

  // What a message belongs to (its header says it; a mismatch is an error naming both).
  enum class Kind : uint32_t {
    kAllReduce = 1,
    kReduceScatter,
    kAllGather,
    kBroadcast,
    kP2p,
    kBarrier
  };

 private:
  // One message of an operation: to or from group rank `peer`.
  struct Transfer {
    int peer;
    bool send;
    char* data;
    size_t bytes;
  };
  TcpComm(ProcessGroup group, int global_rank, CommOptions options)
      : Comm(std::move(group), global_rank, std::move(options)) {}
  // Completes all of `ts` (each direction to one peer in list order) under the watchdog.
  void exchange(Kind kind, const char* op, const std::string& what,
                const std::vector<Transfer>& ts);
  // recv = op over group ranks, in order, of send's chunk [begin(index()), begin(index() + 1))
  // where chunk r of send starts at element begin(r) (`begin` has size() + 1 entries).
  void reduce_chunks(Kind kind, const char* op, char* recv, const char* send,
                     const std::vector<int64_t>& begin, engine::DType dtype, ReduceOp rop,
                     const std::string& what);
  // Every rank's chunk of `buf` (as in reduce_chunks) to every other rank.
  void gather_chunks(Kind kind, const char* op, char* buf, const std::vector<int64_t>& begin,
                     size_t elem, const std::string& what);
  // Aborts all ranks: the connection to `peer` failed during `op`.
  [[noreturn]] void peer_failed(const char* op, int peer, const std::string& error) const;

  std::vector<Fd> peers_;      // by group rank; none for this rank
  std::vector<char> scratch_;  // the other ranks' contributions to this rank's chunk
  uint64_t seq_ = 0;           // operations issued, for messages
};

// The communicators of a grid's groups over TCP: every rank calls it together, in the same
// order. `store` may be null only for a world of one.
absl::StatusOr<GroupComms> create_tcp_group_comms(const ProcessGrid& grid, TcpStore* store,
                                                  const CommOptions& options);

}  // namespace anvil::parallel
