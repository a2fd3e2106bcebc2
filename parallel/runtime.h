// ParallelRuntime: the process-level parallel state of a binary, created once by main() after
// it has read the launcher's variables (launch_env.h) and the layout from its config:
//   MPI initialized when a launcher started the process (mpirun, srun, Hydra); the MPI world
//   size checked against the launcher's; the ProcessGrid; MPI communicators of every group
//   (CPU collectives, and the bootstrap of NCCL communicators). Without a launcher: one rank, no
//   MPI at all, no communicators (a plain `bin/train config.ini` needs no MPI runtime).
// Destruction frees the communicators, then MPI_Finalize.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "parallel/comm.h"
#include "parallel/grid.h"
#include "parallel/launch_env.h"
#include "parallel/mpi_comm.h"

namespace anvil::parallel {

class ParallelRuntime {
 public:
  // InvalidArgument when the layout does not fit the world (ProcessGrid::create's message);
  // FailedPrecondition when MPI sees another world size than the launcher announced (e.g. srun
  // without PMI support: every process then is a world of one).
  static absl::StatusOr<std::unique_ptr<ParallelRuntime>> start(const LaunchInfo& launch, int tp,
                                                                int pp, int dp,
                                                                const CommOptions& options);
  ~ParallelRuntime();
  ParallelRuntime(const ParallelRuntime&) = delete;
  ParallelRuntime& operator=(const ParallelRuntime&) = delete;

  const LaunchInfo& launch() const { return launch_; }
  const ProcessGrid& grid() const { return *grid_; }
  bool has_mpi() const { return mpi_initialized_; }
  // The groups' MPI communicators; all null without MPI.
  MpiGroupComms& mpi() { return mpi_; }
  const CommOptions& options() const { return options_; }

  // Ends every rank after a rank-local fatal error (prints `message` first): MPI_Abort under
  // MPI, std::abort otherwise.
  [[noreturn]] void abort(const std::string& message) const;

 private:
  ParallelRuntime() = default;
  LaunchInfo launch_;
  std::unique_ptr<ProcessGrid> grid_;
  MpiGroupComms mpi_;
  CommOptions options_;
  bool mpi_initialized_ = false;  // by us: we finalize
};

}  // namespace anvil::parallel
