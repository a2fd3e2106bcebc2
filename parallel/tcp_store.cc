// TcpStore: the rendezvous server thread of rank 0 and the blocking client (see tcp_store.h).
#include "parallel/tcp_store.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace anvil::parallel {
namespace {

// Bound on one reply write by the server: a client that does not read for this long is gone.
constexpr double kServerWriteTimeoutS = 30.0;

void append_u64(std::string* out, uint64_t v) { out->append(reinterpret_cast<char*>(&v), 8); }

std::string encode_request(char op, const std::string& key, const std::string& value) {
  std::string out(1, op);
  const uint32_t klen = static_cast<uint32_t>(key.size());
  out.append(reinterpret_cast<const char*>(&klen), 4);
  out += key;
  append_u64(&out, value.size());
  out += value;
  return out;
}

}  // namespace

// Rank 0's server: one thread polls the listening socket, the clients and a wake-up pipe.
// get() of a key not yet set parks the client until a set() of that key answers it.
class TcpStore::Server {
 public:
  static absl::StatusOr<std::unique_ptr<Server>> start(int port) {
    std::unique_ptr<Server> s(new Server());
    absl::StatusOr<Fd> listen = tcp_listen(port);
    if (!listen.ok()) return listen.status();
    s->listen_ = std::move(*listen);
    int pipe_fds[2];
    if (::pipe(pipe_fds) != 0) return absl::InternalError("TcpStore: pipe() failed");
    s->wake_read_ = Fd(pipe_fds[0]);
    s->wake_write_ = Fd(pipe_fds[1]);
    s->thread_ = std::thread([p = s.get()] { p->loop(); });
    return s;
  }
  // Serves until every other client has disconnected (their last replies may still be in
  // flight when rank 0 is done), at most `drain_s` more, then stops.
  void stop(double drain_s) {
    if (!thread_.joinable()) return;  // start() failed before the thread
    drain_deadline_ = deadline_in(drain_s);
    draining_ = true;
    const char wake = 1;
    (void)!::write(wake_write_.get(), &wake, 1);
    thread_.join();
  }
  ~Server() { stop(0.0); }

 private:
  Server() = default;

  void loop() {
    for (;;) {
      if (draining_ && (clients_.empty() || SteadyClock::now() >= drain_deadline_)) return;
      std::vector<pollfd> fds{{wake_read_.get(), POLLIN, 0}, {listen_.get(), POLLIN, 0}};
      for (const auto& [fd, in] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), draining_ ? 100 : -1) < 0) continue;  // EINTR
      if (fds[0].revents != 0) {
        char wake[16];
        (void)!::read(wake_read_.get(), wake, sizeof(wake));
      }
      if (fds[1].revents != 0) {
        for (;;) {
          Fd c(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC));
          if (!c.valid()) break;
          set_nonblocking_nodelay(c.get());
          clients_.emplace(c.release(), std::string());
        }
      }
      for (size_t i = 2; i < fds.size(); ++i) {
        // (A client dropped earlier in this pass, while answering waiters, is skipped.)
        const int fd = fds[i].fd;
        if (fds[i].revents != 0 && clients_.count(fd) != 0 && !serve(fd)) drop(fd);
      }
    }
  }

  // Reads what `fd` sent and answers its complete requests; false when the client is gone.
  bool serve(int fd) {
    std::string& in = clients_.at(fd);
    char buf[65536];
    std::string error;
    const long n = read_some(fd, buf, sizeof(buf), &error);
    if (n < 0) return false;
    in.append(buf, static_cast<size_t>(n));
    for (;;) {
      if (in.size() < 13) return true;
      uint32_t klen = 0;
      std::memcpy(&klen, in.data() + 1, 4);
      if (in.size() < 5 + klen + 8) return true;
      uint64_t vlen = 0;
      std::memcpy(&vlen, in.data() + 5 + klen, 8);
      const size_t total = 13 + klen + vlen;
      if (in.size() < total) return true;
      const char op = in[0];
      std::string key = in.substr(5, klen);
      std::string value = in.substr(13 + klen, vlen);
      in.erase(0, total);
      if (!handle(fd, op, key, std::move(value))) return false;
    }
  }

  bool handle(int fd, char op, const std::string& key, std::string value) {
    if (op == 'S') {
      data_[key] = std::move(value);
      if (!reply(fd, std::string(1, '\x01'))) return false;
      auto waiting = waiters_.find(key);
      if (waiting != waiters_.end()) {
        const std::vector<int> fds = std::move(waiting->second);
        waiters_.erase(waiting);
        for (int w : fds) {
          if (!reply_value(w, data_[key])) drop(w);
        }
      }
      return true;
    }
    if (op == 'G') {
      auto it = data_.find(key);
      if (it == data_.end()) {
        waiters_[key].push_back(fd);
        return true;
      }
      return reply_value(fd, it->second);
    }
    if (op == 'A' && value.size() == 8) {
      int64_t delta = 0, now = 0;
      std::memcpy(&delta, value.data(), 8);
      auto it = data_.find(key);
      if (it != data_.end() && it->second.size() == 8) std::memcpy(&now, it->second.data(), 8);
      now += delta;
      std::string bytes(reinterpret_cast<const char*>(&now), 8);
      data_[key] = bytes;
      return reply(fd, bytes);
    }
    return false;  // not our protocol: drop the client
  }

  bool reply_value(int fd, const std::string& value) {
    std::string out;
    append_u64(&out, value.size());
    return reply(fd, out + value);
  }

  bool reply(int fd, const std::string& bytes) {
    return write_all(fd, bytes.data(), bytes.size(), deadline_in(kServerWriteTimeoutS), "store")
        .ok();
  }

  void drop(int fd) {
    if (clients_.erase(fd) == 0) return;
    ::close(fd);
    for (auto& [key, fds] : waiters_) {
      for (size_t i = 0; i < fds.size();) {
        if (fds[i] == fd) {
          fds.erase(fds.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          ++i;
        }
      }
    }
  }

  Fd listen_, wake_read_, wake_write_;
  std::thread thread_;
  std::atomic<bool> draining_{false};
  SteadyClock::time_point drain_deadline_;  // written before draining_ is set
  std::map<int, std::string> clients_;      // fd -> bytes received, not yet a whole request
  std::map<std::string, std::string> data_;
  std::map<std::string, std::vector<int>> waiters_;  // key -> clients waiting in get()
};

absl::StatusOr<std::unique_ptr<TcpStore>> TcpStore::create(const std::string& host, int port,
                                                           int rank, int world, double timeout_s) {
  std::unique_ptr<TcpStore> s(new TcpStore());
  s->host_ = host;
  s->port_ = port;
  s->rank_ = rank;
  s->world_ = world;
  s->timeout_s_ = timeout_s;
  if (rank == 0) {
    absl::StatusOr<std::unique_ptr<Server>> server = Server::start(port);
    if (!server.ok()) {
      return absl::UnavailableError(absl::StrCat(
          "rank 0 cannot serve the rendezvous store (", s->describe(), "): ",
          server.status().message(), " (pick another MASTER_PORT, or set ANVIL_STORE_PORT)"));
    }
    s->server_ = std::move(*server);
  }
  absl::StatusOr<Fd> fd =
      tcp_connect(host, port, deadline_in(timeout_s),
                  absl::StrCat("rank ", rank, " joining the rendezvous store (", s->describe(),
                               "; is rank 0 running, and MASTER_ADDR reachable from here?)"));
  if (!fd.ok()) return fd.status();
  s->fd_ = std::move(*fd);
  return s;
}

TcpStore::~TcpStore() {
  fd_.reset();
  if (server_) server_->stop(timeout_s_);
}

std::string TcpStore::describe() const {
  return absl::StrCat("MASTER_ADDR=", host_, " port ", port_);
}

std::string TcpStore::unique_key(const std::string& prefix) {
  return absl::StrCat(prefix, "/", key_counts_[prefix]++);
}

absl::StatusOr<std::string> TcpStore::request(char op, const std::string& key,
                                              const std::string& value, const std::string& what) {
  const std::string where =
      absl::StrFormat("rendezvous store (%s) %s on rank %d", describe(), what, rank_);
  if (!fd_.valid()) return absl::UnavailableError(absl::StrCat(where, ": no connection"));
  const SteadyClock::time_point deadline = deadline_in(timeout_s_);
  const std::string req = encode_request(op, key, value);
  absl::Status st = write_all(fd_.get(), req.data(), req.size(), deadline, where);
  std::string out;
  if (st.ok() && op == 'G') {
    uint64_t len = 0;
    st = read_all(fd_.get(), &len, 8, deadline, where);
    if (st.ok()) {
      out.resize(len);
      st = read_all(fd_.get(), out.data(), len, deadline, where);
    }
  } else if (st.ok()) {
    out.resize(op == 'S' ? 1 : 8);
    st = read_all(fd_.get(), out.data(), out.size(), deadline, where);
  }
  if (!st.ok()) {
    fd_.reset();  // the stream is out of step now: no further requests on it
    if (absl::IsDeadlineExceeded(st)) {
      return absl::DeadlineExceededError(absl::StrCat(
          st.message(), " (timeout ", timeout_s_, " s: a rank never reached this point, or died)"));
    }
    return absl::UnavailableError(
        absl::StrCat(st.message(), " (rank 0, which serves the store, has exited or died)"));
  }
  return out;
}

absl::Status TcpStore::set(const std::string& key, const std::string& value) {
  return request('S', key, value, absl::StrCat("set(\"", key, "\")")).status();
}

absl::StatusOr<std::string> TcpStore::get(const std::string& key) {
  return request('G', key, "", absl::StrCat("get(\"", key, "\")"));
}

absl::StatusOr<int64_t> TcpStore::add(const std::string& key, int64_t delta) {
  absl::StatusOr<std::string> r =
      request('A', key, std::string(reinterpret_cast<const char*>(&delta), 8),
              absl::StrCat("add(\"", key, "\")"));
  if (!r.ok()) return r.status();
  int64_t now = 0;
  std::memcpy(&now, r->data(), 8);
  return now;
}

absl::Status TcpStore::barrier() {
  // The last rank to arrive releases the others.
  const std::string key = absl::StrCat("barrier/", barriers_++);
  absl::StatusOr<int64_t> arrived = add(key, 1);
  if (!arrived.ok()) return arrived.status();
  if (*arrived == world_) {
    if (absl::Status s = set(key + "/done", ""); !s.ok()) return s;
  }
  absl::StatusOr<std::string> done = get(key + "/done");
  if (!done.ok()) {
    return absl::Status(done.status().code(),
                        absl::StrCat("barrier of ", world_, " ranks: ", done.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace anvil::parallel
