// The one step of a GPU communicator's set-up that needs a CPU channel: the bytes group rank 0
// chose (NCCL's unique id) delivered to every member of the group. Two channels:
//   broadcast_over(comm)            Comm::broadcast from group rank 0 over a CPU communicator of
//                                   the same group (MpiComm under mpirun / srun)
//   broadcast_through(store, group) through the rendezvous store (torchrun): group rank 0 sets
//                                   a key unique to the group and the call, the others get it
#pragma once

#include <cstddef>
#include <functional>

#include "absl/status/status.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/tcp_store.h"

namespace anvil::parallel {

// Called together by the members of one group with `bytes` at `data`: on return every member
// holds group rank 0's bytes. Errors name the channel and what failed (a store timeout ...).
using BroadcastBytes = std::function<absl::Status(void* data, size_t bytes)>;

// `comm` (a CPU communicator) must outlive the returned function.
BroadcastBytes broadcast_over(Comm& comm);
// `store` must outlive the returned function; call once per communicator, in the same order on
// every member (the key is the store's unique_key for the group).
BroadcastBytes broadcast_through(TcpStore& store, const ProcessGroup& group);

}  // namespace anvil::parallel
