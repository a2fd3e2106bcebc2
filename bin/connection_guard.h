// bin/serve's defence against slow and greedy clients. cpp-httplib 0.11 bounds each read of a
// request, not the whole request, and a connection keeps its worker thread for as long as it
// trickles bytes, so ten clients sending a byte every 3 s held every worker (and /health
// waited 28 s). The guard:
//   - gives a connection `request_timeout` from its accept (or from the end of its previous
//     request, when kept alive) to deliver a whole request (headers and body): then it gets
//     408 (a kept-alive one is just closed) and is shut down, which frees its worker;
//   - lets one client (IP address) hold at most `per_client` connections: beyond that its
//     oldest connections without a request in progress (older than 1 s: a new one may still be
//     sending its request) get 503 and are shut down (bin/serve keeps per_client below its
//     worker count, so no client alone holds every worker from /health and the others for more
//     than that second).
// The handlers mark a request busy (busy(): from its handler to the end of its response,
// streamed ones included) by the peer's address and port. A watcher thread lists the
// process's sockets on the server's port (/proc/self/fd) every 50 ms. It acts on a dup() of a
// socket after checking the dup's peer, so a descriptor closed and reused meanwhile is never
// touched; shutdown() on the dup ends the connection for httplib's worker too.
#pragma once

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace anvil::bin {

inline int port_of(const sockaddr_storage& a) {
  if (a.ss_family == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  if (a.ss_family == AF_INET6) return ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port);
  return -1;
}

// Calls f(fd) for each socket descriptor the process holds now (from /proc/self/fd).
template <typename F>
void for_each_socket(const F& f) {
  DIR* dir = opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = dirfd(dir);
  while (const dirent* e = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own) continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) == 0 && S_ISSOCK(st.st_mode)) f(static_cast<int>(fd));
  }
  closedir(dir);
}

// Debian's cpp-httplib 0.11 listens with a backlog of 5 (compiled in): a burst of more
// connections than that against a busy accept thread overflowed it, the kernel dropped their
// SYNs and the clients resent them only 1 s later. listen() again on the listening socket of
// `port` (Linux updates a listening socket's backlog in place) raises it to SOMAXCONN.
inline void widen_listen_backlog(int port) {
  for_each_socket([port](int fd) {
    int listening = 0;
    socklen_t len = sizeof(listening);
    sockaddr_storage local{};
    socklen_t n = sizeof(local);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) == 0 && port_of(local) == port) {
      listen(fd, SOMAXCONN);
    }
  });
}

class ConnectionGuard {
 public:
  using Clock = std::chrono::steady_clock;

  ConnectionGuard(int port, Clock::duration request_timeout, int per_client)
      : port_(port), timeout_(request_timeout), per_client_(per_client) {
    thread_ = std::thread([this] { watch(); });
  }
  ~ConnectionGuard() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  ConnectionGuard(const ConnectionGuard&) = delete;
  ConnectionGuard& operator=(const ConnectionGuard&) = delete;

  // Marks the connection of peer ip:port busy until the returned token is released (its last
  // copy: a streamed response keeps one in its content provider).
  std::shared_ptr<void> busy(const std::string& ip, int port) {
    const std::string key = ip + "|" + std::to_string(port);
    {
      std::lock_guard<std::mutex> lock(mu_);
      Conn& c = conns_[key];
      if (c.busy++ == 0 && c.opened == Clock::time_point()) c.opened = Clock::now();
    }
    return std::shared_ptr<void>(nullptr, [this, key](void*) {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = conns_.find(key);
      if (it == conns_.end()) return;
      if (--it->second.busy == 0) {
        it->second.idle_since = Clock::now();
        it->second.served = true;
      }
    });
  }

 private:
  struct Conn {
    Clock::time_point opened, idle_since;  // first seen; end of its last request
    int busy = 0;                          // requests in their handler or response
    bool served = false;                   // a request done (kept alive since)
    bool ended = false;                    // shut down by the guard
    bool seen = false;                     // found by the current scan
  };

  void watch() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(50), [this] { return stop_; })) {
      scan();
    }
  }

  // "ip|port" of a socket's peer when it is a connection to our port; "" otherwise.
  std::string peer_of(int fd) const {
    sockaddr_storage local{}, peer{};
    socklen_t n = sizeof(local);
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &n) != 0) return "";
    if (port_of(local) != port_) return "";
    n = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &n) != 0) return "";
    char ip[INET6_ADDRSTRLEN] = {};
    const void* addr =
        peer.ss_family == AF_INET
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&peer)->sin_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&peer)->sin6_addr);
    if (inet_ntop(peer.ss_family, addr, ip, sizeof(ip)) == nullptr) return "";
    return std::string(ip) + "|" + std::to_string(port_of(peer));
  }

  // Sends `reply` (may be empty) to the connection of peer `key` and shuts it down, through a
  // dup of `fd` whose peer is checked first.
  void end(int fd, const std::string& key, const std::string& reply) {
    const int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0) return;
    if (peer_of(d) == key) {
      if (!reply.empty()) send(d, reply.data(), reply.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      shutdown(d, SHUT_RDWR);
    }
    close(d);
  }

  static std::string reply(int status, const char* reason, const std::string& message) {
    const std::string body = "{\"error\": {\"message\": \"" + message +
                             "\", \"type\": \"invalid_request_error\", \"code\": \"" +
                             (status == 408 ? "timeout" : "too_many_connections") + "\"}}";
    return "HTTP/1.1 " + std::to_string(status) + " " + reason +
           "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body;
  }

  // The sockets of our port now: peer key -> descriptor.
  std::map<std::string, int> sockets() const {
    std::map<std::string, int> out;
    for_each_socket([this, &out](int fd) {
      const std::string key = peer_of(fd);
      if (!key.empty()) out.emplace(key, fd);
    });
    return out;
  }

  void scan() {  // under mu_
    const Clock::time_point now = Clock::now();
    const std::map<std::string, int> open = sockets();
    for (auto& [key, c] : conns_) c.seen = false;
    std::map<std::string, std::vector<std::pair<Clock::time_point, std::string>>> by_ip;
    for (const auto& [key, fd] : open) {
      Conn& c = conns_[key];
      c.seen = true;
      if (c.opened == Clock::time_point()) c.opened = c.idle_since = now;
      if (c.ended) continue;
      if (c.busy == 0 && now - c.idle_since > timeout_) {
        c.ended = true;
        end(fd, key,
            c.served ? "" : reply(408, "Request Timeout", "the request did not arrive in time"));
        continue;
      }
      by_ip[key.substr(0, key.find('|'))].emplace_back(c.opened, key);
    }
    // Over its limit, a client loses its oldest connections that have no request in progress
    // (a slow client's); one younger than kGrace may still be sending its request.
    const Clock::duration grace = std::min<Clock::duration>(kGrace, timeout_);
    for (auto& [ip, list] : by_ip) {
      std::sort(list.begin(), list.end());  // oldest first
      size_t excess = list.size() > static_cast<size_t>(per_client_)
                          ? list.size() - static_cast<size_t>(per_client_)
                          : 0;
      for (size_t i = 0; i < list.size() && excess > 0; ++i) {
        Conn& c = conns_[list[i].second];
        if (c.busy > 0 || now - c.opened < grace) continue;
        c.ended = true;
        --excess;
        end(open.at(list[i].second), list[i].second,
            c.served ? ""
                     : reply(503, "Service Unavailable", "too many connections from this client"));
      }
    }
    for (auto it = conns_.begin(); it != conns_.end();) {  // closed connections
      it = !it->second.seen && it->second.busy == 0 ? conns_.erase(it) : std::next(it);
    }
  }

  static constexpr std::chrono::seconds kGrace{1};
  const int port_;
  const Clock::duration timeout_;
  const int per_client_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::map<std::string, Conn> conns_;  // "ip|port" of the peer
  std::thread thread_;
};

}  // namespace anvil::bin
