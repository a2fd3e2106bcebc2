// MPI_COMM_WORLD as one data-parallel group (tp = pp = 1), or laid out as a (tp, pp, dp) grid
// with its groups' communicators, for multi-rank tests under mpirun.
#pragma once

#include <mpi.h>

#include <memory>

#include "absl/status/statusor.h"
#include "parallel/grid.h"
#include "parallel/mpi_comm.h"

namespace anvil::parallel::testing {

struct WorldComm {
  int world = 1, rank = 0;
  std::unique_ptr<MpiComm> comm;
};

inline absl::StatusOr<WorldComm> world_dp_comm() {
  WorldComm w;
  MPI_Comm_size(MPI_COMM_WORLD, &w.world);
  MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::create(w.world, w.rank, 1, 1);
  if (!grid.ok()) return grid.status();
  auto comm = MpiComm::create(MPI_COMM_WORLD, grid->dp_group(), w.rank, CommOptions{});
  if (!comm.ok()) return comm.status();
  w.comm = std::move(*comm);
  return w;
}

// A (tp, pp, dp) grid of MPI_COMM_WORLD and the MPI communicators of this rank's groups (held
// together: the communicators outlive nothing they were made from).
struct LayoutComms {
  ProcessGrid grid;
  GroupComms comms;
};

inline absl::StatusOr<std::unique_ptr<LayoutComms>> layout_comms(int tp, int pp, int dp,
                                                                 double timeout_s = 120) {
  int world = 1, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::create(world, rank, tp, pp, dp);
  if (!grid.ok()) return grid.status();
  auto l = std::make_unique<LayoutComms>(LayoutComms{*std::move(grid), {}});
  CommOptions opt;
  opt.timeout_s = timeout_s;
  absl::StatusOr<GroupComms> comms = create_mpi_group_comms(l->grid, opt);
  if (!comms.ok()) return comms.status();
  l->comms = std::move(*comms);
  return l;
}

}  // namespace anvil::parallel::testing
