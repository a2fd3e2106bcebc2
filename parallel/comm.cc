// Comm: argument checks and watchdog messages shared by MpiComm, TcpComm and NcclComm;
// abort_all_ranks.
#include "parallel/comm.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/log.h"
#include "engine/status.h"

namespace anvil::parallel {

const char* reduce_op_name(ReduceOp op) { return op == ReduceOp::kSum ? "sum" : "max"; }

void abort_all_ranks(int global_rank, const std::string& message) {
  std::fprintf(stderr, "[anvil rank %d] %s\n", global_rank, message.c_str());
  std::fflush(stderr);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  // MPI_Abort ends every process of the job (Open MPI's mpirun and srun both kill the rest).
  if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 3);
  std::abort();
}

void Comm::check_views(const char* op, ConstTensorView recv, ConstTensorView send,
                       int64_t recv_over_send_num, int64_t recv_over_send_den) const {
  const std::string where = absl::StrCat(op, " on the ", group_.describe(), ": ");
  ANVIL_CHECK_MSG(recv.dtype == send.dtype,
                  absl::StrCat(where, "recv ", engine::describe(recv), " and send ",
                               engine::describe(send), " differ in dtype"));
  ANVIL_CHECK_MSG(
      recv.device == device() && send.device == device(),
      absl::StrCat(where, "buffers must live on ", std::string(engine::device_name(device())),
                   ", got recv ", engine::describe(recv), ", send ", engine::describe(send)));
  ANVIL_CHECK_MSG(recv.is_contiguous() && send.is_contiguous(),
                  absl::StrCat(where, "buffers must be contiguous"));
  ANVIL_CHECK_MSG(recv.numel() * recv_over_send_den == send.numel() * recv_over_send_num,
                  absl::StrFormat("%srecv %s must hold %d/%d times the %d elements of send %s",
                                  where, engine::describe(recv), recv_over_send_num,
                                  recv_over_send_den, send.numel(), engine::describe(send)));
}

void Comm::check_peer(const char* op, int peer) const {
  ANVIL_CHECK_MSG(peer >= 0 && peer < size() && peer != index(),
                  absl::StrFormat("%s on the %s: peer %d must be another group rank in [0, %d)", op,
                                  group_.describe(), peer, size()));
}

void Comm::check_p2p_ops(const std::vector<P2pOp>& ops) const {
  for (const P2pOp& o : ops) {
    const char* op = o.send ? "batch_p2p send" : "batch_p2p recv";
    check_views(op, o.buf, o.buf, 1, 1);
    check_peer(op, o.peer);
  }
}

std::string Comm::describe_buffer(ConstTensorView v) {
  return absl::StrCat(engine::describe(v), " ",
                      engine::format_bytes(static_cast<double>(v.bytes())));
}

std::string Comm::describe_p2p_ops(const std::vector<P2pOp>& ops) {
  constexpr size_t kShown = 4;
  std::string out = absl::StrCat(ops.size(), " ops: ");
  for (size_t i = 0; i < ops.size() && i < kShown; ++i) {
    const P2pOp& o = ops[i];
    absl::StrAppend(&out, i > 0 ? ", " : "", o.send ? "send " : "recv ", engine::describe(o.buf),
                    " ", engine::format_bytes(static_cast<double>(o.buf.bytes())),
                    o.send ? " to" : " from", " group rank ", o.peer);
  }
  if (ops.size() > kShown) absl::StrAppend(&out, ", ...");
  return out;
}

std::string Comm::timeout_message(const char* op, uint64_t seq, const std::string& what,
                                  double waited_s) const {
  return absl::StrFormat(
      "watchdog: %s #%d (%s) on the %s has not finished after %.1f s (timeout %.1f s) on global "
      "rank %d (group rank %d of %d): a rank of the group died, hangs, or never called it; "
      "aborting all ranks",
      op, seq, what, group_.describe(), waited_s, options_.timeout_s, global_rank_, index(),
      size());
}

void Comm::on_timeout(const std::string& message) const {
  if (options_.on_timeout) {
    options_.on_timeout(message);
    return;
  }
  abort_all_ranks(global_rank_, message);
}

}  // namespace anvil::parallel
