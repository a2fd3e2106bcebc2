// Rank discovery from the launcher's environment variables, as a pure function of a variable
// map: libraries never read the environment (DESIGN.md §1); bin/ passes `environ` in.
//
// Launchers recognized, first match wins:
//   openmpi  mpirun / srun --mpi=pmix with Open MPI:
//            OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK
//   pmi      MPICH / Intel MPI (Hydra) and srun --mpi=pmi2: PMI_RANK, PMI_SIZE, and the local
//            rank from MPI_LOCALRANKID or PMI_LOCAL_RANK (0 when neither is set)
//   torchrun torchrun / torch.distributed.run and the deepspeed launcher (no MPI): RANK,
//            WORLD_SIZE, LOCAL_RANK (0 when unset), LOCAL_WORLD_SIZE (checked when set),
//            MASTER_ADDR and MASTER_PORT (the rendezvous store on rank 0, parallel/tcp_store.h).
//            The store's port: ANVIL_STORE_PORT when set; else MASTER_PORT + 1 when
//            TORCHELASTIC_USE_AGENT_STORE=True (torchrun's agent on MASTER_ADDR then serves
//            torch's own store on MASTER_PORT, which anvil does not speak); else MASTER_PORT.
//   slurm    srun: SLURM_PROCID, SLURM_STEP_NUM_TASKS (else SLURM_NTASKS), SLURM_LOCALID
//   none     a plain process: rank 0 of 1
// Precedence, and why:
//   - MPI's variables (openmpi, pmi) win over RANK/WORLD_SIZE: `deepspeed --launcher openmpi`
//     (or mvapich, impi) starts the processes with mpirun and also exports RANK, WORLD_SIZE,
//     MASTER_ADDR; there the MPI world is authoritative and MPI is used.
//   - torchrun wins over slurm: `srun --ntasks-per-node=1 torchrun ...` runs one torchrun per
//     node, so SLURM_PROCID is the node's index, not the process's rank.
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
  std::string launcher = "none";  // "openmpi", "pmi", "slurm", "torchrun" or "none"
  // torchrun only: where rank 0's rendezvous store listens. master_addr may be empty only when
  // world is 1 (master_port is then 0): such a run needs no store.
  std::string master_addr;
  int master_port = 0;
  int store_port = 0;  // where anvil's store listens and connects (see above)

  // True when a launcher started this process.
  bool launched() const { return launcher != "none"; }
  // True when the launcher is an MPI one: MPI must be initialized, even for world 1.
  bool uses_mpi() const { return launched() && launcher != "torchrun"; }
};

// InvalidArgument naming the variable and its value when a recognized launcher's variables are
// incomplete, not integers, or inconsistent (rank outside [0, world), local rank > rank; for
// torchrun also LOCAL_RANK outside [0, LOCAL_WORLD_SIZE), MASTER_PORT or the store's port not in
// [1, 65535], and MASTER_ADDR or MASTER_PORT unset when WORLD_SIZE > 1).
absl::StatusOr<LaunchInfo> launch_info_from_env(const EnvMap& env);

// "NAME=value" strings (e.g. main's envp or `environ`, null-terminated) as a map; entries
// without '=' are skipped.
EnvMap env_map(const char* const* envp);

}  // namespace anvil::parallel
