// Comm: collectives and point-to-point transfers among the ranks of one ProcessGroup, over
// TensorViews, with one interface for both backends (DESIGN.md §5):
//   MpiComm  (parallel/mpi_comm.h)  CPU buffers; every call completes before it returns.
//   TcpComm  (parallel/tcp_comm.h)  the same over TCP sockets, without MPI (torchrun).
//   NcclComm (parallel/nccl_comm.h) CUDA buffers; every call is enqueued on the given stream
//            and returns at once (order it against other streams with engine::Event).
// The same parallel code runs on both, so every parallel feature is tested on the CPU in CI.
//
// Semantics (n = elements of one rank's contribution, P = size(), views contiguous):
//   all_reduce(recv, send):      recv[i] = op over ranks of send[i]            recv, send: [n]
//   reduce_scatter(recv, send):  recv[i] = op over ranks of send[index()*n + i] send: [P*n],
//                                                                              recv: [n]
//   all_gather(recv, send):      recv[r*n + i] = send[i] of group rank r       send: [n],
//                                                                              recv: [P*n]
//   broadcast(buf, root):        buf = buf of group rank `root`
//   send(buf, peer) / recv(buf, peer): point-to-point with group rank `peer`
//   barrier():                   returns (CPU) or lets the stream continue (GPU) once all ranks
//                                have entered it
// In place: all_reduce with recv.data == send.data; all_gather with send = this rank's slice of
// recv; reduce_scatter with recv = this rank's slice of send (NCCL's conventions, on both
// backends). Ranks are positions in the group (ProcessGroup::index), not global ranks.
// send and recv block (CPU) or stall the stream (GPU) until the peer has posted the matching
// call, so two ranks exchanging data must not both send first: order them (even ranks send
// first, odd ranks receive first), or post both in one batch_p2p.
//   batch_p2p(ops):              every send and recv of `ops` posted together, complete (CPU)
//                                or enqueued (GPU) when it returns; sends and recvs with the
//                                same peer may be listed in any order on either side. Several
//                                messages in one direction between the same two ranks match in
//                                list order (MPI's and NCCL's non-overtaking rule).
// Dtypes: data movement (all_gather, broadcast, send/recv) takes any dtype. Reductions take
// f32, f64, i32, i64 on both backends, and bf16/f16 on NCCL only: MPI has no 16-bit float sum
// (the CPU path computes in f32, so it never needs one).
//
// Watchdog: an operation that does not finish within CommOptions::timeout_s calls
// CommOptions::on_timeout with a message naming the operation, its size, the group and this
// rank; the default prints it and aborts every rank (MPI_Abort; without MPI this rank aborts
// and its TCP peers fail on its closed connections), so a rank that died or never joined ends
// the job with a clear error instead of a hang.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/device.h"
#include "engine/stream.h"
#include "engine/tensor.h"
#include "parallel/grid.h"

namespace anvil::parallel {

using engine::ConstTensorView;
using engine::Stream;
using engine::TensorView;

enum class ReduceOp { kSum, kMax };

// One point-to-point transfer of a batch_p2p with group rank `peer`: send reads buf, recv
// writes it (buf: any dtype, contiguous, on the communicator's device; bytes must match the
// peer's).
struct P2pOp {
  bool send;
  TensorView buf;
  int peer;
};

struct CommOptions {
  // Seconds an operation may take (from when it starts executing) before the watchdog fires.
  double timeout_s = 600.0;
  // Called with the watchdog's message. Default (empty): print to stderr, abort all ranks.
  // A test may install a hook that records the message and returns; the operation then keeps
  // waiting (the hook is called again after each further timeout_s).
  std::function<void(const std::string&)> on_timeout;
};

// Prints "[anvil rank R] <message>" to stderr, then ends every rank: MPI_Abort(MPI_COMM_WORLD)
// when MPI is initialized, std::abort() otherwise (under torchrun the other ranks then see this
// rank's TcpComm connections close and end themselves). Safe to call from any thread.
[[noreturn]] void abort_all_ranks(int global_rank, const std::string& message);

class Comm {
 public:
  virtual ~Comm() = default;

  virtual engine::Device device() const = 0;
  const ProcessGroup& group() const { return group_; }
  int size() const { return group_.size(); }
  int index() const { return group_.index; }  // this rank's position in the group
  int global_rank() const { return global_rank_; }

  virtual void all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) = 0;
  virtual void reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) = 0;
  virtual void all_gather(TensorView recv, ConstTensorView send, Stream& s) = 0;
  virtual void broadcast(TensorView buf, int root, Stream& s) = 0;
  virtual void send(ConstTensorView buf, int peer, Stream& s) = 0;
  virtual void recv(TensorView buf, int peer, Stream& s) = 0;
  // Posts all of `ops` together and returns when all have completed (CPU: MPI_Isend/MPI_Irecv,
  // then waits for all under the watchdog) or are enqueued on `s` (NCCL: one ncclGroupStart/
  // ncclGroupEnd around ncclSend/ncclRecv). An empty list does nothing. The pipeline's
  // exchange of activations and gradients (parallel/pipeline_schedule.h: one batch per round).
  virtual void batch_p2p(const std::vector<P2pOp>& ops, Stream& s) = 0;
  virtual void barrier(Stream& s) = 0;

  // In-place all-reduce: buf = op over ranks of buf.
  void all_reduce(TensorView buf, ReduceOp op, Stream& s) { all_reduce(buf, buf, op, s); }

 protected:
  Comm(ProcessGroup group, int global_rank, CommOptions options)
      : group_(std::move(group)), global_rank_(global_rank), options_(std::move(options)) {}

  // Checks shared by both backends (CHECK-fails naming the operation, group and views).
  void check_views(const char* op, ConstTensorView recv, ConstTensorView send,
                   int64_t recv_over_send_num, int64_t recv_over_send_den) const;
  void check_peer(const char* op, int peer) const;
  // check_views and check_peer for every op of a batch_p2p.
  void check_p2p_ops(const std::vector<P2pOp>& ops) const;
  // "f32[1024] cpu 4 KiB", for watchdog messages.
  static std::string describe_buffer(ConstTensorView v);
  // "2 ops: recv f32[8] cpu 32 B from group rank 1, send ..." (first 4 ops), for the watchdog.
  static std::string describe_p2p_ops(const std::vector<P2pOp>& ops);
  // The watchdog's message for operation number `seq`.
  std::string timeout_message(const char* op, uint64_t seq, const std::string& what,
                              double waited_s) const;
  // Calls options_.on_timeout, or abort_all_ranks.
  void on_timeout(const std::string& message) const;

  ProcessGroup group_;
  int global_rank_;
  CommOptions options_;
};

// "all_reduce", "reduce_scatter", ...
const char* reduce_op_name(ReduceOp op);

}  // namespace anvil::parallel
