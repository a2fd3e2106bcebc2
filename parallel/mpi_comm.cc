// MpiComm: nonblocking MPI collectives polled against the watchdog deadline (see mpi_comm.h).
#include "parallel/mpi_comm.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/log.h"
#include "engine/status.h"

namespace anvil::parallel {
namespace {

using engine::DType;

// The MPI type that reduces `dtype`, or MPI_DATATYPE_NULL (MPI has no 16-bit float sum).
MPI_Datatype reduce_type(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return MPI_FLOAT;
    case DType::kF64:
      return MPI_DOUBLE;
    case DType::kI32:
      return MPI_INT32_T;
    case DType::kI64:
      return MPI_INT64_T;
    default:
      return MPI_DATATYPE_NULL;
  }
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::kSum ? MPI_SUM : MPI_MAX; }

int to_int_count(int64_t n, const char* op) {
  ANVIL_CHECK_MSG(n <= INT_MAX, absl::StrFormat("MpiComm %s: %d elements per rank exceed MPI's "
                                                "int count limit; use smaller buckets",
                                                op, n));
  return static_cast<int>(n);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MpiComm>> MpiComm::create(MPI_Comm parent, const ProcessGroup& group,
                                                         int global_rank,
                                                         const CommOptions& options) {
  MPI_Comm comm = MPI_COMM_NULL;
  const int color = group.is_member() ? group.id : MPI_UNDEFINED;
  const int err = MPI_Comm_split(parent, color, group.is_member() ? group.index : 0, &comm);
  if (err != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(err, msg, &len);
    return absl::InternalError(absl::StrCat("MPI_Comm_split for the ", group.describe(),
                                            " failed: ", std::string(msg, len)));
  }
  if (!group.is_member()) return std::unique_ptr<MpiComm>();
  int size = 0, rank = 0;
  MPI_Comm_size(comm, &size);
  MPI_Comm_rank(comm, &rank);
  if (size != group.size() || rank != group.index) {
    MPI_Comm_free(&comm);
    return absl::InternalError(absl::StrFormat(
        "MPI_Comm_split for the %s gave a communicator of %d ranks with this rank at %d, "
        "expected %d ranks and position %d (do all ranks use the same grid?)",
        group.describe(), size, rank, group.size(), group.index));
  }
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  return std::unique_ptr<MpiComm>(new MpiComm(group, global_rank, options, comm));
}

MpiComm::~MpiComm() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (comm_ != MPI_COMM_NULL && !finalized) MPI_Comm_free(&comm_);
}

void MpiComm::check(int mpi_error, const char* op, const char* call) const {
  if (mpi_error == MPI_SUCCESS) return;
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(mpi_error, msg, &len);
  abort_all_ranks(global_rank_,
                  absl::StrFormat("MpiComm %s on the %s: %s failed: %s", op, group_.describe(),
                                  call, std::string(msg, static_cast<size_t>(len))));
}

void MpiComm::wait(MPI_Request* reqs, int count, const char* op, const std::string& what) {
  const uint64_t seq = ++seq_;
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  Clock::time_point deadline = start + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(options_.timeout_s));
  // Spin briefly (most operations on small buffers finish in microseconds), then back off to
  // sleeps of up to 1 ms so ranks waiting on a slow peer leave the cores to it (CI runs more
  // ranks than cores).
  int polls = 0;
  std::chrono::microseconds nap(1);
  std::vector<MPI_Status> statuses(static_cast<size_t>(count));
  for (;;) {
    int done = 0;
    const int err = MPI_Testall(count, reqs, &done, statuses.data());
    if (err == MPI_ERR_IN_STATUS) {  // name the failed request's own error
      for (const MPI_Status& st : statuses) {
        if (st.MPI_ERROR != MPI_ERR_PENDING) check(st.MPI_ERROR, op, "MPI_Testall");
      }
    }
    check(err, op, "MPI_Testall");
    if (done) return;
    const Clock::time_point now = Clock::now();
    if (now >= deadline) {
      on_timeout(
          timeout_message(op, seq, what, std::chrono::duration<double>(now - start).count()));
      // The hook returned (a test): keep waiting, and fire again after another timeout.
      deadline = now + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(options_.timeout_s));
    }
    if (++polls > 1000) {
      std::this_thread::sleep_for(nap);
      nap = std::min(nap * 2, std::chrono::microseconds(1000));
    }
  }
}

void MpiComm::all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::all_reduce needs a CPU stream");
  check_views("all_reduce", recv, send, 1, 1);
  const MPI_Datatype type = reduce_type(send.dtype);
  ANVIL_CHECK_MSG(type != MPI_DATATYPE_NULL,
                  absl::StrCat("MpiComm::all_reduce: MPI cannot reduce ", engine::describe(send),
                               " (f32, f64, i32, i64 only)"));
  const bool in_place = recv.data == send.data;
  const size_t elem = engine::dtype_size(send.dtype);
  // MPI counts are ints: reduce huge buffers in pieces.
  constexpr int64_t kChunk = INT_MAX / 2;
  const int64_t n = send.numel();
  int64_t begin = 0;
  do {
    const int count = static_cast<int>(std::min(kChunk, n - begin));
    char* r = static_cast<char*>(recv.data) + begin * elem;
    const char* sd = static_cast<const char*>(send.data) + begin * elem;
    MPI_Request req;
    check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : sd, r, count, type, mpi_op(op), comm_, &req),
          "all_reduce", "MPI_Iallreduce");
    wait(&req, "all_reduce",
         absl::StrCat(reduce_op_name(op), " of ", describe_buffer(send),
                      n > kChunk ? absl::StrCat(", elements from ", begin) : ""));
    begin += kChunk;
  } while (begin < n);
}

void MpiComm::reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::reduce_scatter needs a CPU stream");
  check_views("reduce_scatter", recv, send, 1, size());
  const MPI_Datatype type = reduce_type(send.dtype);
  ANVIL_CHECK_MSG(type != MPI_DATATYPE_NULL,
                  absl::StrCat("MpiComm::reduce_scatter: MPI cannot reduce ",
                               engine::describe(send), " (f32, f64, i32, i64 only)"));
  const int count = to_int_count(recv.numel(), "reduce_scatter");
  const size_t elem = engine::dtype_size(send.dtype);
  char* const send_base = static_cast<char*>(const_cast<void*>(send.data));
  // In place (NCCL's convention): recv is this rank's slice of send. MPI's in-place form
  // leaves the result at the start of the buffer instead; move it to the slice afterwards.
  const bool in_place = recv.data == send_base + static_cast<size_t>(index()) * count * elem;
  ANVIL_CHECK_MSG(in_place || !(recv.data >= send.data && recv.data < send_base + send.bytes()),
                  "MpiComm::reduce_scatter: recv overlaps send without being this rank's slice");
  MPI_Request req;
  check(MPI_Ireduce_scatter_block(in_place ? MPI_IN_PLACE : send.data,
                                  in_place ? send_base : recv.data, count, type, mpi_op(op), comm_,
                                  &req),
        "reduce_scatter", "MPI_Ireduce_scatter_block");
  wait(&req, "reduce_scatter", absl::StrCat(reduce_op_name(op), " of ", describe_buffer(send)));
  if (in_place && index() != 0) std::memmove(recv.data, send_base, recv.bytes());
}

void MpiComm::all_gather(TensorView recv, ConstTensorView send, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::all_gather needs a CPU stream");
  check_views("all_gather", recv, send, size(), 1);
  const int64_t bytes = static_cast<int64_t>(send.bytes());
  const int count = to_int_count(bytes, "all_gather");
  // In place: send is this rank's slice of recv (NCCL's convention, MPI_IN_PLACE's too).
  const bool in_place =
      send.data == static_cast<const char*>(recv.data) + static_cast<size_t>(index()) * bytes;
  MPI_Request req;
  check(MPI_Iallgather(in_place ? MPI_IN_PLACE : send.data, count, MPI_BYTE, recv.data, count,
                       MPI_BYTE, comm_, &req),
        "all_gather", "MPI_Iallgather");
  wait(&req, "all_gather", describe_buffer(send));
}

void MpiComm::broadcast(TensorView buf, int root, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::broadcast needs a CPU stream");
  check_views("broadcast", buf, buf, 1, 1);
  ANVIL_CHECK_MSG(
      root >= 0 && root < size(),
      absl::StrFormat("MpiComm::broadcast: root %d outside the %s", root, group_.describe()));
  const int count = to_int_count(static_cast<int64_t>(buf.bytes()), "broadcast");
  MPI_Request req;
  check(MPI_Ibcast(buf.data, count, MPI_BYTE, root, comm_, &req), "broadcast", "MPI_Ibcast");
  wait(&req, "broadcast", absl::StrCat(describe_buffer(buf), " from group rank ", root));
}

void MpiComm::send(ConstTensorView buf, int peer, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::send needs a CPU stream");
  check_views("send", buf, buf, 1, 1);
  check_peer("send", peer);
  const int count = to_int_count(static_cast<int64_t>(buf.bytes()), "send");
  MPI_Request req;
  check(MPI_Isend(buf.data, count, MPI_BYTE, peer, 0, comm_, &req), "send", "MPI_Isend");
  wait(&req, "send", absl::StrCat(describe_buffer(buf), " to group rank ", peer));
}

void MpiComm::recv(TensorView buf, int peer, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::recv needs a CPU stream");
  check_views("recv", buf, buf, 1, 1);
  check_peer("recv", peer);
  const int count = to_int_count(static_cast<int64_t>(buf.bytes()), "recv");
  MPI_Request req;
  check(MPI_Irecv(buf.data, count, MPI_BYTE, peer, 0, comm_, &req), "recv", "MPI_Irecv");
  wait(&req, "recv", absl::StrCat(describe_buffer(buf), " from group rank ", peer));
}

void MpiComm::batch_p2p(const std::vector<P2pOp>& ops, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::batch_p2p needs a CPU stream");
  check_p2p_ops(ops);
  if (ops.empty()) return;
  // Every transfer is posted before any is waited for, so the order of sends and recvs in the
  // list (and on the peer's side) cannot deadlock.
  std::vector<MPI_Request> reqs(ops.size(), MPI_REQUEST_NULL);
  for (size_t i = 0; i < ops.size(); ++i) {
    const P2pOp& o = ops[i];
    const int count = to_int_count(static_cast<int64_t>(o.buf.bytes()), "batch_p2p");
    if (o.send) {
      check(MPI_Isend(o.buf.data, count, MPI_BYTE, o.peer, 0, comm_, &reqs[i]), "batch_p2p",
            "MPI_Isend");
    } else {
      check(MPI_Irecv(o.buf.data, count, MPI_BYTE, o.peer, 0, comm_, &reqs[i]), "batch_p2p",
            "MPI_Irecv");
    }
  }
  wait(reqs.data(), static_cast<int>(reqs.size()), "batch_p2p", describe_p2p_ops(ops));
}

void MpiComm::barrier(Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "MpiComm::barrier needs a CPU stream");
  MPI_Request req;
  check(MPI_Ibarrier(comm_, &req), "barrier", "MPI_Ibarrier");
  wait(&req, "barrier", "no data");
}

absl::StatusOr<GroupComms> create_mpi_group_comms(const ProcessGrid& grid,
                                                  const CommOptions& options) {
  GroupComms c;
  const int r = grid.rank();
  ANVIL_ASSIGN_OR_RETURN(c.world, MpiComm::create(MPI_COMM_WORLD, grid.world_group(), r, options));
  ANVIL_ASSIGN_OR_RETURN(c.tp, MpiComm::create(MPI_COMM_WORLD, grid.tp_group(), r, options));
  ANVIL_ASSIGN_OR_RETURN(c.dp, MpiComm::create(MPI_COMM_WORLD, grid.dp_group(), r, options));
  ANVIL_ASSIGN_OR_RETURN(c.pp, MpiComm::create(MPI_COMM_WORLD, grid.pp_group(), r, options));
  ANVIL_ASSIGN_OR_RETURN(c.embedding,
                         MpiComm::create(MPI_COMM_WORLD, grid.embedding_group(), r, options));
  return c;
}

}  // namespace anvil::parallel
