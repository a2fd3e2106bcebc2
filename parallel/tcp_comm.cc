// TcpComm: connection set-up through the store, the poll()-driven transfer engine, and the
// collectives built on it (see tcp_comm.h).
#include "parallel/tcp_comm.h"

#include <poll.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/status.h"

namespace anvil::parallel {
namespace {

using engine::DType;

constexpr uint32_t kMagic = 0x31766e61;  // "anv1"

// Precedes every payload.
struct Header {
  uint32_t magic;
  uint32_t kind;
  uint64_t bytes;
};
static_assert(sizeof(Header) == 16);

// Sent by the connecting member of a pair, so the accepting one knows who it is.
struct Hello {
  uint32_t magic;
  int32_t group_id;
  int32_t index;
};

const char* kind_name(TcpComm::Kind k) {
  switch (k) {
    case TcpComm::Kind::kAllReduce:
      return "all_reduce";
    case TcpComm::Kind::kReduceScatter:
      return "reduce_scatter";
    case TcpComm::Kind::kAllGather:
      return "all_gather";
    case TcpComm::Kind::kBroadcast:
      return "broadcast";
    case TcpComm::Kind::kP2p:
      return "send/recv";
    case TcpComm::Kind::kBarrier:
      return "barrier";
  }
  return "unknown operation";
}

bool reducible(DType d) {
  return d == DType::kF32 || d == DType::kF64 || d == DType::kI32 || d == DType::kI64;
}

// out[i] = op over r = 0..P-1 of parts[r][i], accumulated in r order. Element-outer, so `out`
// may alias any part (each element is read from every part before it is written).
template <typename T>
void reduce_in_order(T* out, const std::vector<const char*>& parts, int64_t n, ReduceOp op) {
  const size_t p = parts.size();
  for (int64_t i = 0; i < n; ++i) {
    T acc = reinterpret_cast<const T*>(parts[0])[i];
    for (size_t r = 1; r < p; ++r) {
      const T x = reinterpret_cast<const T*>(parts[r])[i];
      acc = op == ReduceOp::kSum ? static_cast<T>(acc + x) : (x > acc ? x : acc);
    }
    out[i] = acc;
  }
}

void reduce_typed(DType d, char* out, const std::vector<const char*>& parts, int64_t n,
                  ReduceOp op) {
  switch (d) {
    case DType::kF32:
      return reduce_in_order(reinterpret_cast<float*>(out), parts, n, op);
    case DType::kF64:
      return reduce_in_order(reinterpret_cast<double*>(out), parts, n, op);
    case DType::kI32:
      return reduce_in_order(reinterpret_cast<int32_t*>(out), parts, n, op);
    case DType::kI64:
      return reduce_in_order(reinterpret_cast<int64_t*>(out), parts, n, op);
    default:
      ANVIL_CHECK_MSG(false, "TcpComm: unreachable dtype");
  }
}

// Element offsets of P near-equal chunks of n elements: chunk r = [b[r], b[r + 1]).
std::vector<int64_t> chunk_bounds(int64_t n, int p) {
  std::vector<int64_t> b(static_cast<size_t>(p) + 1);
  for (int r = 0; r <= p; ++r) b[static_cast<size_t>(r)] = n / p * r + std::min<int64_t>(r, n % p);
  return b;
}

// One direction of one peer's queue in exchange(): the transfers in order, and progress.
struct Lane {
  std::vector<size_t> items;  // indices into the transfer list
  size_t next = 0;            // first unfinished
  size_t header_done = 0, data_done = 0;
  Header header{};
  bool pending() const { return next < items.size(); }
};

}  // namespace

absl::StatusOr<std::unique_ptr<TcpComm>> TcpComm::create(const ProcessGroup& group, int global_rank,
                                                         TcpStore* store,
                                                         const CommOptions& options) {
  if (!group.is_member()) return std::unique_ptr<TcpComm>();
  std::unique_ptr<TcpComm> c(new TcpComm(group, global_rank, options));
  const int p = group.size(), me = group.index;
  c->peers_.resize(static_cast<size_t>(p));
  if (p == 1) return c;
  if (store == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("TcpComm::create: the ", group.describe(),
                                                   " needs a rendezvous store (MASTER_ADDR)"));
  }
  const std::string prefix = store->unique_key(absl::StrCat("tcpcomm/", group.name, "/", group.id));
  const std::string where =
      absl::StrFormat("TcpComm set-up of the %s on global rank %d", group.describe(), global_rank);
  ANVIL_ASSIGN_OR_RETURN(Fd listen, tcp_listen(0));
  const std::string host = store->local_host();
  ANVIL_RETURN_IF_ERROR(
      store->set(absl::StrCat(prefix, "/", me), absl::StrCat(host, " ", bound_port(listen.get()))));
  const SteadyClock::time_point deadline = deadline_in(store->timeout_s());
  // Connect to the members after this one (their listening sockets exist before they publish,
  // and the kernel completes connections without accept(), so nobody waits on anybody here).
  for (int j = me + 1; j < p; ++j) {
    ANVIL_ASSIGN_OR_RETURN(std::string addr, store->get(absl::StrCat(prefix, "/", j)));
    const size_t space = addr.rfind(' ');
    int port = 0;
    if (space == std::string::npos || !absl::SimpleAtoi(addr.substr(space + 1), &port)) {
      return absl::InternalError(
          absl::StrCat(where, ": bad address \"", addr, "\" of group rank ", j, " in the store"));
    }
    const std::string peer =
        absl::StrFormat("%s: group rank %d (global rank %d) at %s port %d", where, j,
                        group.ranks[static_cast<size_t>(j)], addr.substr(0, space), port);
    ANVIL_ASSIGN_OR_RETURN(Fd fd, tcp_connect(addr.substr(0, space), port, deadline, peer));
    const Hello hello{kMagic, group.id, me};
    ANVIL_RETURN_IF_ERROR(write_all(fd.get(), &hello, sizeof(hello), deadline, peer));
    c->peers_[static_cast<size_t>(j)] = std::move(fd);
  }
  // Accept the members before this one, in whatever order they arrive.
  for (int k = 0; k < me; ++k) {
    const std::string wait = absl::StrFormat(
        "%s: waiting for %d of the group ranks before %d to connect", where, me - k, me);
    ANVIL_ASSIGN_OR_RETURN(Fd fd, tcp_accept(listen.get(), deadline, wait));
    Hello hello{};
    ANVIL_RETURN_IF_ERROR(read_all(fd.get(), &hello, sizeof(hello), deadline, wait));
    if (hello.magic != kMagic || hello.group_id != group.id || hello.index < 0 ||
        hello.index >= me || c->peers_[static_cast<size_t>(hello.index)].valid()) {
      return absl::InternalError(absl::StrFormat(
          "%s: unexpected connection (group id %d, rank %d): do all ranks use the same grid?",
          where, hello.group_id, hello.index));
    }
    c->peers_[static_cast<size_t>(hello.index)] = std::move(fd);
  }
  return c;
}

void TcpComm::peer_failed(const char* op, int peer, const std::string& error) const {
  abort_all_ranks(
      global_rank_,
      absl::StrFormat("TcpComm %s on the %s: the connection to group rank %d (global rank %d) "
                      "failed on global rank %d: %s (that rank exited, crashed or aborted: see "
                      "its output); aborting",
                      op, group_.describe(), peer, group_.ranks[static_cast<size_t>(peer)],
                      global_rank_, error));
}

void TcpComm::exchange(Kind kind, const char* op, const std::string& what,
                       const std::vector<Transfer>& ts) {
  const uint64_t seq = ++seq_;
  const size_t p = peers_.size();
  std::vector<Lane> sends(p), recvs(p);
  for (size_t i = 0; i < ts.size(); ++i) {
    (ts[i].send ? sends : recvs)[static_cast<size_t>(ts[i].peer)].items.push_back(i);
  }
  const SteadyClock::time_point start = SteadyClock::now();
  SteadyClock::time_point deadline = deadline_in(options_.timeout_s);
  std::string error;
  // Moves lane `l` of `peer` forward until the socket would block; false when all is done.
  auto progress = [&](Lane& l, int peer) {
    const int fd = peers_[static_cast<size_t>(peer)].get();
    while (l.pending()) {
      const Transfer& t = ts[l.items[l.next]];
      if (l.header_done == 0 && l.data_done == 0 && t.send) {
        l.header = Header{kMagic, static_cast<uint32_t>(kind), t.bytes};
      }
      char* const hdr = reinterpret_cast<char*>(&l.header);
      long n = 0;
      if (l.header_done < sizeof(Header)) {
        n = t.send ? write_some(fd, hdr + l.header_done, sizeof(Header) - l.header_done, &error)
                   : read_some(fd, hdr + l.header_done, sizeof(Header) - l.header_done, &error);
        if (n < 0) peer_failed(op, peer, error);
        l.header_done += static_cast<size_t>(n);
        if (l.header_done < sizeof(Header)) return;
        if (!t.send && (l.header.magic != kMagic || l.header.kind != static_cast<uint32_t>(kind) ||
                        l.header.bytes != t.bytes)) {
          const bool ours = l.header.magic == kMagic;
          peer_failed(op, peer,
                      ours ? absl::StrFormat(
                                 "it sent part of a %s of %d bytes where this rank expects part "
                                 "of a %s of %d bytes (%s): the ranks called different "
                                 "operations or sizes",
                                 kind_name(static_cast<Kind>(l.header.kind)), l.header.bytes,
                                 kind_name(kind), t.bytes, what)
                           : std::string("it sent bytes that are not a TcpComm message"));
        }
      }
      if (l.data_done < t.bytes) {
        n = t.send ? write_some(fd, t.data + l.data_done, t.bytes - l.data_done, &error)
                   : read_some(fd, t.data + l.data_done, t.bytes - l.data_done, &error);
        if (n < 0) peer_failed(op, peer, error);
        l.data_done += static_cast<size_t>(n);
        if (l.data_done < t.bytes) return;
      }
      ++l.next;
      l.header_done = l.data_done = 0;
    }
  };
  std::vector<pollfd> fds;
  std::vector<int> fd_peer;
  for (;;) {
    fds.clear();
    fd_peer.clear();
    for (size_t j = 0; j < p; ++j) {
      const short events = static_cast<short>((sends[j].pending() ? POLLOUT : 0) |
                                              (recvs[j].pending() ? POLLIN : 0));
      if (events == 0) continue;
      fds.push_back({peers_[j].get(), events, 0});
      fd_peer.push_back(static_cast<int>(j));
    }
    if (fds.empty()) return;
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
    const int ready = ::poll(fds.data(), fds.size(),
                             static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000)));
    if (ready == 0 && SteadyClock::now() >= deadline) {
      on_timeout(timeout_message(
          op, seq, what, std::chrono::duration<double>(SteadyClock::now() - start).count()));
      // The hook returned (a test): keep waiting, and fire again after another timeout.
      deadline = deadline_in(options_.timeout_s);
      continue;
    }
    for (size_t k = 0; k < fds.size(); ++k) {
      const short ev = fds[k].revents;
      if (ev == 0) continue;
      const size_t j = static_cast<size_t>(fd_peer[k]);
      // Errors and hang-ups surface as failed reads or writes, with the system's message.
      if (ev & (POLLIN | POLLERR | POLLHUP)) progress(recvs[j], fd_peer[k]);
      if (ev & (POLLOUT | POLLERR | POLLHUP)) progress(sends[j], fd_peer[k]);
    }
  }
}

void TcpComm::reduce_chunks(Kind kind, const char* op, char* recv, const char* send,
                            const std::vector<int64_t>& begin, DType dtype, ReduceOp rop,
                            const std::string& what) {
  const size_t elem = engine::dtype_size(dtype);
  const int me = index();
  const int64_t mine = begin[static_cast<size_t>(me) + 1] - begin[static_cast<size_t>(me)];
  const size_t mine_bytes = static_cast<size_t>(mine) * elem;
  scratch_.resize(mine_bytes * static_cast<size_t>(size()));
  std::vector<Transfer> ts;
  std::vector<const char*> parts;
  for (int r = 0; r < size(); ++r) {
    const size_t ri = static_cast<size_t>(r);
    if (r == me) {
      parts.push_back(send + static_cast<size_t>(begin[ri]) * elem);
      continue;
    }
    char* slot = scratch_.data() + ri * mine_bytes;
    parts.push_back(slot);
    const size_t their_bytes = static_cast<size_t>(begin[ri + 1] - begin[ri]) * elem;
    ts.push_back(
        {r, true, const_cast<char*>(send) + static_cast<size_t>(begin[ri]) * elem, their_bytes});
    ts.push_back({r, false, slot, mine_bytes});
  }
  exchange(kind, op, what, ts);
  reduce_typed(dtype, recv, parts, mine, rop);
}

void TcpComm::gather_chunks(Kind kind, const char* op, char* buf, const std::vector<int64_t>& begin,
                            size_t elem, const std::string& what) {
  const size_t me = static_cast<size_t>(index());
  std::vector<Transfer> ts;
  for (int r = 0; r < size(); ++r) {
    const size_t ri = static_cast<size_t>(r);
    if (ri == me) continue;
    ts.push_back({r, true, buf + static_cast<size_t>(begin[me]) * elem,
                  static_cast<size_t>(begin[me + 1] - begin[me]) * elem});
    ts.push_back({r, false, buf + static_cast<size_t>(begin[ri]) * elem,
                  static_cast<size_t>(begin[ri + 1] - begin[ri]) * elem});
  }
  exchange(kind, op, what, ts);
}

void TcpComm::all_reduce(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::all_reduce needs a CPU stream");
  check_views("all_reduce", recv, send, 1, 1);
  ANVIL_CHECK_MSG(reducible(send.dtype),
                  absl::StrCat("TcpComm::all_reduce: cannot reduce ", engine::describe(send),
                               " (f32, f64, i32, i64 only, as MpiComm)"));
  const std::string w = absl::StrCat(reduce_op_name(op), " of ", describe_buffer(send));
  const std::vector<int64_t> begin = chunk_bounds(send.numel(), size());
  char* const r = static_cast<char*>(recv.data);
  if (size() == 1) {
    if (recv.data != send.data) std::memcpy(r, send.data, send.bytes());
    return;
  }
  const size_t elem = engine::dtype_size(send.dtype);
  // This rank's chunk reduced into its place in recv, then every chunk to every rank. (In
  // place, the chunks this rank sends in the first phase are overwritten only in the second.)
  reduce_chunks(Kind::kAllReduce, "all_reduce",
                r + static_cast<size_t>(begin[static_cast<size_t>(index())]) * elem,
                static_cast<const char*>(send.data), begin, send.dtype, op, w);
  gather_chunks(Kind::kAllReduce, "all_reduce", r, begin, elem, w);
}

void TcpComm::reduce_scatter(TensorView recv, ConstTensorView send, ReduceOp op, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::reduce_scatter needs a CPU stream");
  check_views("reduce_scatter", recv, send, 1, size());
  ANVIL_CHECK_MSG(reducible(send.dtype),
                  absl::StrCat("TcpComm::reduce_scatter: cannot reduce ", engine::describe(send),
                               " (f32, f64, i32, i64 only, as MpiComm)"));
  const int64_t n = recv.numel();
  std::vector<int64_t> begin(static_cast<size_t>(size()) + 1);
  for (size_t r = 0; r < begin.size(); ++r) begin[r] = static_cast<int64_t>(r) * n;
  // In place (recv = this rank's slice of send) works: reduce_in_order reads before it writes.
  reduce_chunks(Kind::kReduceScatter, "reduce_scatter", static_cast<char*>(recv.data),
                static_cast<const char*>(send.data), begin, send.dtype, op,
                absl::StrCat(reduce_op_name(op), " of ", describe_buffer(send)));
}

void TcpComm::all_gather(TensorView recv, ConstTensorView send, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::all_gather needs a CPU stream");
  check_views("all_gather", recv, send, size(), 1);
  const size_t bytes = send.bytes();
  char* const mine = static_cast<char*>(recv.data) + static_cast<size_t>(index()) * bytes;
  if (mine != send.data) std::memmove(mine, send.data, bytes);  // in place: already there
  std::vector<int64_t> begin(static_cast<size_t>(size()) + 1);
  for (size_t r = 0; r < begin.size(); ++r) begin[r] = static_cast<int64_t>(r * bytes);
  gather_chunks(Kind::kAllGather, "all_gather", static_cast<char*>(recv.data), begin, 1,
                describe_buffer(send));
}

void TcpComm::broadcast(TensorView buf, int root, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::broadcast needs a CPU stream");
  check_views("broadcast", buf, buf, 1, 1);
  ANVIL_CHECK_MSG(
      root >= 0 && root < size(),
      absl::StrFormat("TcpComm::broadcast: root %d outside the %s", root, group_.describe()));
  std::vector<Transfer> ts;
  char* const data = static_cast<char*>(buf.data);
  if (index() == root) {
    for (int r = 0; r < size(); ++r) {
      if (r != root) ts.push_back({r, true, data, buf.bytes()});
    }
  } else {
    ts.push_back({root, false, data, buf.bytes()});
  }
  exchange(Kind::kBroadcast, "broadcast",
           absl::StrCat(describe_buffer(buf), " from group rank ", root), ts);
}

void TcpComm::send(ConstTensorView buf, int peer, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::send needs a CPU stream");
  check_views("send", buf, buf, 1, 1);
  check_peer("send", peer);
  exchange(Kind::kP2p, "send", absl::StrCat(describe_buffer(buf), " to group rank ", peer),
           {{peer, true, static_cast<char*>(const_cast<void*>(buf.data)), buf.bytes()}});
}

void TcpComm::recv(TensorView buf, int peer, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::recv needs a CPU stream");
  check_views("recv", buf, buf, 1, 1);
  check_peer("recv", peer);
  exchange(Kind::kP2p, "recv", absl::StrCat(describe_buffer(buf), " from group rank ", peer),
           {{peer, false, static_cast<char*>(buf.data), buf.bytes()}});
}

void TcpComm::batch_p2p(const std::vector<P2pOp>& ops, Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::batch_p2p needs a CPU stream");
  check_p2p_ops(ops);
  if (ops.empty()) return;
  std::vector<Transfer> ts;
  for (const P2pOp& o : ops) {
    ts.push_back({o.peer, o.send, static_cast<char*>(o.buf.data), o.buf.bytes()});
  }
  exchange(Kind::kP2p, "batch_p2p", describe_p2p_ops(ops), ts);
}

void TcpComm::barrier(Stream& s) {
  ANVIL_CHECK_MSG(!s.is_cuda(), "TcpComm::barrier needs a CPU stream");
  // Everyone reports to group rank 0 (empty messages), which then releases everyone.
  std::vector<Transfer> in, out;
  for (int r = 1; r < size(); ++r) {
    if (index() == 0) {
      in.push_back({r, false, nullptr, 0});
      out.push_back({r, true, nullptr, 0});
    }
  }
  if (index() != 0) {
    in.push_back({0, true, nullptr, 0});
    out.push_back({0, false, nullptr, 0});
  }
  exchange(Kind::kBarrier, "barrier", "no data", in);
  exchange(Kind::kBarrier, "barrier", "no data", out);
}

absl::StatusOr<GroupComms> create_tcp_group_comms(const ProcessGrid& grid, TcpStore* store,
                                                  const CommOptions& options) {
  GroupComms c;
  const int r = grid.rank();
  ANVIL_ASSIGN_OR_RETURN(c.world, TcpComm::create(grid.world_group(), r, store, options));
  ANVIL_ASSIGN_OR_RETURN(c.tp, TcpComm::create(grid.tp_group(), r, store, options));
  ANVIL_ASSIGN_OR_RETURN(c.dp, TcpComm::create(grid.dp_group(), r, store, options));
  ANVIL_ASSIGN_OR_RETURN(c.pp, TcpComm::create(grid.pp_group(), r, store, options));
  ANVIL_ASSIGN_OR_RETURN(c.embedding, TcpComm::create(grid.embedding_group(), r, store, options));
  return c;
}

}  // namespace anvil::parallel
