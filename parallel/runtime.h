// ParallelRuntime: the process-level parallel state of a binary, created once by main() after
// it has read the launcher's variables (launch_env.h) and the layout from its config:
//   - MPI launchers (mpirun, srun, Hydra): MPI initialized, the MPI world size checked against
//     the launcher's, and MPI communicators of every group (CPU collectives, and the bootstrap
//     of NCCL communicators).
//   - torchrun / deepspeed launcher: no MPI at all. The rendezvous store (tcp_store.h; rank 0
//     serves it at MASTER_ADDR:MASTER_PORT) and TCP communicators of every group (tcp_comm.h);
//     NCCL communicators get their unique ids through the store. A world of one without
//     MASTER_ADDR has no store (it needs none).
//   - No launcher: one rank, no MPI, no communicators (a plain `bin/train config.ini` needs no
//     MPI runtime).
// Plus the ProcessGrid in every case. Destruction frees the communicators, then MPI_Finalize
// (MPI) or the store (torchrun: rank 0 serves until the other ranks have disconnected).
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/group_comms.h"
#include "parallel/launch_env.h"
#include "parallel/tcp_store.h"

namespace anvil::parallel {

class ParallelRuntime {
 public:
  // InvalidArgument when the layout does not fit the world (ProcessGrid::create's message);
  // FailedPrecondition when MPI sees another world size than the launcher announced (e.g. srun
  // without PMI support: every process then is a world of one); torchrun: the store's and
  // TcpComm's errors (rank 0 unreachable, a rank missing after options.timeout_s ...).
  static absl::StatusOr<std::unique_ptr<ParallelRuntime>> start(const LaunchInfo& launch, int tp,
                                                                int pp, int dp,
                                                                const CommOptions& options);
  ~ParallelRuntime();
  ParallelRuntime(const ParallelRuntime&) = delete;
  ParallelRuntime& operator=(const ParallelRuntime&) = delete;

  const LaunchInfo& launch() const { return launch_; }
  const ProcessGrid& grid() const { return *grid_; }
  bool has_mpi() const { return mpi_initialized_; }
  // The groups' CPU communicators (MpiComm or TcpComm); all null without a launcher.
  GroupComms& comms() { return comms_; }
  // The rendezvous store under torchrun (world > 1, or MASTER_ADDR set); null otherwise.
  TcpStore* store() const { return store_.get(); }
  const CommOptions& options() const { return options_; }

  // Ends every rank after a rank-local fatal error (prints `message` first): MPI_Abort under
  // MPI, std::abort otherwise (under torchrun the other ranks then see this rank's connections
  // close and end too).
  [[noreturn]] void abort(const std::string& message) const;

 private:
  ParallelRuntime() = default;
  LaunchInfo launch_;
  std::unique_ptr<ProcessGrid> grid_;
  std::unique_ptr<TcpStore> store_;
  GroupComms comms_;
  CommOptions options_;
  bool mpi_initialized_ = false;  // by us: we finalize
};

}  // namespace anvil::parallel
