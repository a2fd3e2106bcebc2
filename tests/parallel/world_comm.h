// MPI_COMM_WORLD as one data-parallel group (tp = pp = 1), for multi-rank tests under mpirun.
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

}  // namespace anvil::parallel::testing
