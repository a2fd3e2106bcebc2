// Rank discovery from the launcher's environment variables, as a pure function of a variable
// map: libraries never read the environment (DESIGN.md §1); bin/ passes `environ` in.
//
// Launchers recognized, first match wins:
//   openmpi  mpirun / srun --mpi=pmix with Open MPI:
//            OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   pmi      MPICH / Intel MPI (Hydra) and srun --mpi=pmi2: PMI_RANK, PMI_SIZE, and the local
//            rank from MPI_LOCALRANKID or PMI_LOCAL_RANK (0 when neither is set)
//   slurm    srun: SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), SLURM_LOCALID
//   none     a plain process: rank 0 of 1
// A SLURM batch script that runs the binary without srun also carries SLURM_PROCID=0 and
// SLURM_NTASKS=N of the allocation; without SLURM_STEP_NUM_TASKS or SLURM_STEP_ID (set by srun
// only) the SLURM variables are ignored, so such a run is one process instead of waiting
// forever for N - 1 peers that were never started.
#pragma once

#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace anvil::parallel {

using EnvMap = std::map<std::string, std::string>;

struct LaunchInfo {
  int rank = 0;
  int world = 1;
  int local_rank = 0;             // rank among the processes on this node: picks the GPU
  std::string launcher = "none";  // "openmpi", "pmi", "slurm" or "none"

  // True when a launcher started this process (MPI must be initialized, even for world 1).
  bool launched() const { return launcher != "none"; }
};

// InvalidArgument naming the variable and its value when a recognized launcher's variables are
// incomplete, not integers, or inconsistent (rank outside [0, world), local rank > rank).
absl::StatusOr<LaunchInfo> launch_info_from_env(const EnvMap& env);

// "NAME=value" strings (e.g. main's envp or `environ`, null-terminated) as a map; entries
// without '=' are skipped.
EnvMap env_map(const char* const* envp);

}  // namespace anvil::parallel
