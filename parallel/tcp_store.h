// TcpStore: the rendezvous key-value store of a run without MPI (torchrun, deepspeed's
// launcher), like torch.distributed's TCPStore. Rank 0 serves it on LaunchInfo::store_port
// (MASTER_PORT; ANVIL_STORE_PORT or MASTER_PORT + 1 beside torchrun's own store, see
// launch_env.h) on every interface, from a background thread; every rank, rank 0 included, is a
// client connected to MASTER_ADDR at that port. Values are byte strings:
//   set(key, value)   stores value (a later set replaces it)
//   get(key)          the value, waiting until some rank has set it
//   add(key, delta)   the key as a signed 64-bit counter += delta, returns the new value
//   barrier()         returns once all `world` ranks have called their n-th barrier()
// Every wait is bounded by the store's timeout; a timeout or a lost connection is an error
// naming MASTER_ADDR, the port, the key and the time waited. The store carries only the
// start-up exchange (addresses of the ranks' communicators, NCCL unique ids); the data of
// collectives goes directly between the ranks (tcp_comm.h).
//
// Wire format (host byte order: little-endian on every supported host; one request at a time per
// client):
//   request  u8 op ('S' set, 'G' get, 'A' add), u32 key bytes, key, u64 value bytes, value
//   reply    set: u8 1;  get: u64 value bytes, value;  add: i64 new value
// A client is not thread-safe: one thread at a time uses it.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "parallel/tcp_socket.h"

namespace anvil::parallel {

class TcpStore {
 public:
  // Rank 0 starts the server on `port` first (Unavailable naming the port when it is taken);
  // then every rank connects to host:port, retrying until timeout_s (the other ranks may start
  // before rank 0 listens).
  static absl::StatusOr<std::unique_ptr<TcpStore>> create(const std::string& host, int port,
                                                          int rank, int world, double timeout_s);
  // Rank 0: serves until the other ranks have disconnected (they exited or destroyed their
  // store), at most timeout_s, then stops.
  ~TcpStore();
  TcpStore(const TcpStore&) = delete;
  TcpStore& operator=(const TcpStore&) = delete;

  absl::Status set(const std::string& key, const std::string& value);
  absl::StatusOr<std::string> get(const std::string& key);
  absl::StatusOr<int64_t> add(const std::string& key, int64_t delta);
  absl::Status barrier();

  // `prefix` + "/" + how many times this process asked for `prefix` before: the same key on
  // every rank that asks in the same order (e.g. one per communicator of a group).
  std::string unique_key(const std::string& prefix);

  int rank() const { return rank_; }
  int world() const { return world_; }
  double timeout_s() const { return timeout_s_; }
  // "MASTER_ADDR=host port N", for messages (N: MASTER_PORT, or the port beside it, see
  // launch_env.h).
  std::string describe() const;
  // This host's address as the store's server sees it: where other ranks can reach it.
  std::string local_host() const { return local_address(fd_.get()); }

 private:
  class Server;
  TcpStore() = default;
  // Sends one request and reads its reply: set "\x01", get the value, add 8 bytes.
  absl::StatusOr<std::string> request(char op, const std::string& key, const std::string& value,
                                      const std::string& what);

  std::string host_;
  int port_ = 0, rank_ = 0, world_ = 1;
  double timeout_s_ = 0.0;
  std::unique_ptr<Server> server_;  // rank 0 only
  Fd fd_;                           // the client connection
  std::map<std::string, int64_t> key_counts_;
  int64_t barriers_ = 0;
};

}  // namespace anvil::parallel
