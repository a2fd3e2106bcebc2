// TCP helpers: poll-bounded listen, connect, accept, read and write (see tcp_socket.h).
#include "parallel/tcp_socket.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace anvil::parallel {
namespace {

std::string errno_text(int err) { return std::strerror(err); }

// Milliseconds until `deadline` for poll(), at least 0, at most 1 s (so long waits re-check).
int poll_ms(SteadyClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1000));
}

double seconds_since(SteadyClock::time_point start) {
  return std::chrono::duration<double>(SteadyClock::now() - start).count();
}

// Waits until `fd` is ready for `events` or `deadline`; false on timeout.
bool wait_ready(int fd, short events, SteadyClock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int n = ::poll(&p, 1, poll_ms(deadline));
    if (n > 0) return true;
    if (n < 0 && errno != EINTR) return true;  // let the I/O call report the error
    if (SteadyClock::now() >= deadline) return false;
  }
}

// One non-blocking connect attempt to `ai`, completed within `deadline`; "" or the error.
std::string try_connect(const addrinfo* ai, SteadyClock::time_point deadline, Fd* out) {
  Fd fd(::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol));
  if (!fd.valid()) return errno_text(errno);
  set_nonblocking_nodelay(fd.get());
  if (::connect(fd.get(), ai->ai_addr, ai->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return errno_text(errno);
    if (!wait_ready(fd.get(), POLLOUT, deadline)) return "connection attempt timed out";
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return errno_text(err);
  }
  *out = std::move(fd);
  return "";
}

}  // namespace

SteadyClock::time_point deadline_in(double seconds) {
  return SteadyClock::now() +
         std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    reset();
    fd_ = o.release();
  }
  return *this;
}

int Fd::release() {
  const int fd = fd_;
  fd_ = -1;
  return fd;
}

void Fd::reset() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void set_nonblocking_nodelay(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL, 0) | O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // fails harmlessly otherwise
}

absl::StatusOr<Fd> tcp_listen(int port) {
  int one = 1, zero = 0;
  // IPv6 dual-stack first (accepts IPv4 peers too), IPv4 where IPv6 is disabled.
  Fd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.valid()) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      if (errno == EADDRINUSE) {
        return absl::UnavailableError(
            absl::StrCat("cannot listen on TCP port ", port, ": ", errno_text(errno)));
      }
      fd.reset();
    }
  }
  if (!fd.valid()) {
    fd = Fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return absl::UnavailableError(absl::StrCat("socket(): ", errno_text(errno)));
    ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot listen on TCP port ", port, ": ", errno_text(errno)));
    }
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return absl::UnavailableError(
        absl::StrCat("listen() on TCP port ", port, ": ", errno_text(errno)));
  }
  set_nonblocking_nodelay(fd.get());
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&a)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&a)->sin_port);
}

std::string local_address(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  char host[NI_MAXHOST] = "";
  ::getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof(host), nullptr, 0,
                NI_NUMERICHOST);
  std::string out = host;
  // An IPv4 peer of a dual-stack socket shows as "::ffff:a.b.c.d"; keep the plain form.
  if (out.rfind("::ffff:", 0) == 0 && out.find('.') != std::string::npos) out = out.substr(7);
  return out;
}

absl::StatusOr<Fd> tcp_connect(const std::string& host, int port, SteadyClock::time_point deadline,
                               const std::string& what) {
  const SteadyClock::time_point start = SteadyClock::now();
  std::string last_error = "no attempt";
  std::chrono::milliseconds pause(50);
  for (;;) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* list = nullptr;
    const int gai = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &list);
    if (gai != 0) {
      last_error = absl::StrCat("cannot resolve the host: ", ::gai_strerror(gai));
    } else {
      for (const addrinfo* ai = list; ai != nullptr; ai = ai->ai_next) {
        Fd fd;
        last_error = try_connect(ai, deadline, &fd);
        if (last_error.empty()) {
          ::freeaddrinfo(list);
          return fd;
        }
      }
      ::freeaddrinfo(list);
    }
    if (SteadyClock::now() + pause >= deadline) break;
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(500));
  }
  return absl::DeadlineExceededError(
      absl::StrFormat("%s: could not connect to %s port %d within %.1f s (last error: %s)", what,
                      host, port, seconds_since(start), last_error));
}

absl::StatusOr<Fd> tcp_accept(int listen_fd, SteadyClock::time_point deadline,
                              const std::string& what) {
  const SteadyClock::time_point start = SteadyClock::now();
  for (;;) {
    Fd fd(::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC));
    if (fd.valid()) {
      set_nonblocking_nodelay(fd.get());
      return fd;
    }
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED) {
      return absl::UnavailableError(absl::StrCat(what, ": accept(): ", errno_text(errno)));
    }
    if (!wait_ready(listen_fd, POLLIN, deadline)) {
      return absl::DeadlineExceededError(
          absl::StrFormat("%s: no connection arrived within %.1f s", what, seconds_since(start)));
    }
  }
}

long write_some(int fd, const void* data, size_t bytes, std::string* error) {
  const ssize_t n = ::send(fd, data, bytes, MSG_NOSIGNAL);
  if (n >= 0) return static_cast<long>(n);
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  *error = errno_text(errno);
  return -1;
}

long read_some(int fd, void* data, size_t bytes, std::string* error) {
  if (bytes == 0) return 0;
  const ssize_t n = ::recv(fd, data, bytes, 0);
  if (n > 0) return static_cast<long>(n);
  if (n == 0) {
    *error = "connection closed by the peer";
    return -1;
  }
  if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) return 0;
  *error = errno_text(errno);
  return -1;
}

absl::Status write_all(int fd, const void* data, size_t bytes, SteadyClock::time_point deadline,
                       const std::string& what) {
  const SteadyClock::time_point start = SteadyClock::now();
  const char* p = static_cast<const char*>(data);
  size_t done = 0;
  std::string error;
  while (done < bytes) {
    const long n = write_some(fd, p + done, bytes - done, &error);
    if (n < 0) return absl::UnavailableError(absl::StrCat(what, ": ", error));
    done += static_cast<size_t>(n);
    if (done < bytes && n == 0 && !wait_ready(fd, POLLOUT, deadline)) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: timed out after %.1f s sending %d bytes", what, seconds_since(start), bytes));
    }
  }
  return absl::OkStatus();
}

absl::Status read_all(int fd, void* data, size_t bytes, SteadyClock::time_point deadline,
                      const std::string& what) {
  const SteadyClock::time_point start = SteadyClock::now();
  char* p = static_cast<char*>(data);
  size_t done = 0;
  std::string error;
  while (done < bytes) {
    const long n = read_some(fd, p + done, bytes - done, &error);
    if (n < 0) return absl::UnavailableError(absl::StrCat(what, ": ", error));
    done += static_cast<size_t>(n);
    if (done < bytes && n == 0 && !wait_ready(fd, POLLIN, deadline)) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "%s: timed out after %.1f s waiting for a reply", what, seconds_since(start)));
    }
  }
  return absl::OkStatus();
}

}  // namespace anvil::parallel
