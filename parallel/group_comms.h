// GroupComms: the CPU communicators of a grid's groups, one per group this rank belongs to,
// over MPI (create_mpi_group_comms, mpi_comm.h) or over TCP without MPI (create_tcp_group_comms,
// tcp_comm.h). They carry the CPU path's collectives, and bin/train's world-wide agreements
// (stop signals, checkpoint barriers) on every device.
#pragma once

#include <memory>

#include "parallel/comm.h"

namespace anvil::parallel {

// Null when this rank is not a member (`embedding`), and all null without a launcher.
struct GroupComms {
  std::unique_ptr<Comm> world, tp, dp, pp, embedding;
};

}  // namespace anvil::parallel
