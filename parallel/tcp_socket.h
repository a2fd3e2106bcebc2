// TCP helpers over POSIX sockets for the rendezvous store (tcp_store.h) and the CPU
// communicator without MPI (tcp_comm.h): an owning descriptor, listen / connect with retries /
// accept, and reads and writes of whole buffers, all bounded by a deadline. Sockets are
// non-blocking; waits go through poll(), so nothing here blocks past its deadline. Writes use
// MSG_NOSIGNAL: a peer that died gives an error (EPIPE), not SIGPIPE.
#pragma once

#include <chrono>
#include <cstddef>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace anvil::parallel {

using SteadyClock = std::chrono::steady_clock;

// `seconds` from now.
SteadyClock::time_point deadline_in(double seconds);

// An owned file descriptor (closed on destruction; -1 = none). Move-only.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() { reset(); }
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release();
  void reset();

 private:
  int fd_ = -1;
};

// A non-blocking socket listening on every interface at `port` (0: an ephemeral port chosen by
// the kernel): IPv6 dual-stack when the host has IPv6, IPv4 otherwise. Unavailable naming the
// port and the system's error (e.g. "Address already in use").
absl::StatusOr<Fd> tcp_listen(int port);

// The port a socket is bound to (after tcp_listen(0): the one the kernel picked).
int bound_port(int fd);

// The numeric address (e.g. "10.0.0.3", "::1") of this end of a connected socket: the
// interface through which this host reaches the peer, so other hosts can usually reach this
// one there too.
std::string local_address(int fd);

// Connects to host:port (a name or numeric address), retrying refused, unreachable and
// unresolvable attempts every 50-500 ms until `deadline` (the peer may not listen yet).
// DeadlineExceeded naming `what`, host, port, the time waited and the last error.
absl::StatusOr<Fd> tcp_connect(const std::string& host, int port, SteadyClock::time_point deadline,
                               const std::string& what);

// One connection accepted on `listen_fd` before `deadline` (non-blocking, TCP_NODELAY), or
// DeadlineExceeded naming `what`.
absl::StatusOr<Fd> tcp_accept(int listen_fd, SteadyClock::time_point deadline,
                              const std::string& what);

// All `bytes` written to / read from `fd` before `deadline`. Unavailable when the peer closed
// the connection or the socket failed, DeadlineExceeded on timeout; both name `what`.
absl::Status write_all(int fd, const void* data, size_t bytes, SteadyClock::time_point deadline,
                       const std::string& what);
absl::Status read_all(int fd, void* data, size_t bytes, SteadyClock::time_point deadline,
                      const std::string& what);

// Non-blocking I/O for poll loops: bytes transferred (>= 0; 0 when the call would block), or
// -1 with the error in `error` ("connection closed by the peer" for an orderly EOF on read).
long write_some(int fd, const void* data, size_t bytes, std::string* error);
long read_some(int fd, void* data, size_t bytes, std::string* error);

// Marks `fd` non-blocking and, for TCP, disables Nagle (small messages leave at once).
void set_nonblocking_nodelay(int fd);

}  // namespace anvil::parallel
