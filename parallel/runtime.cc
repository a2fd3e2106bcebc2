// ParallelRuntime: MPI or TCP start-up and shutdown around the grid and its communicators.
#include "parallel/runtime.h"

#include <mpi.h>

#include <utility>

#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "parallel/mpi_comm.h"
#include "parallel/tcp_comm.h"

namespace anvil::parallel {

absl::StatusOr<std::unique_ptr<ParallelRuntime>> ParallelRuntime::start(
    const LaunchInfo& launch, int tp, int pp, int dp, const CommOptions& options) {
  std::unique_ptr<ParallelRuntime> rt(new ParallelRuntime());
  rt->launch_ = launch;
  rt->options_ = options;
  // Layout errors are the same on every rank: report them before touching MPI.
  absl::StatusOr<ProcessGrid> grid = ProcessGrid::create(launch.world, launch.rank, tp, pp, dp);
  if (!grid.ok()) return grid.status();
  rt->grid_ = std::make_unique<ProcessGrid>(std::move(*grid));
  if (launch.launcher == "torchrun") {
    if (!launch.master_addr.empty()) {
      ANVIL_ASSIGN_OR_RETURN(rt->store_,
                             TcpStore::create(launch.master_addr, launch.store_port, launch.rank,
                                              launch.world, options.timeout_s));
    }
    ANVIL_ASSIGN_OR_RETURN(rt->comms_,
                           create_tcp_group_comms(*rt->grid_, rt->store_.get(), options));
    return rt;
  }
  if (!launch.uses_mpi()) return rt;

  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // The NCCL watchdog thread may call MPI_Abort: ask for full thread support (Open MPI's
    // MPI_Abort works from any thread in practice even when less is provided).
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
      return absl::UnavailableError("MPI_Init_thread failed");
    }
    rt->mpi_initialized_ = true;
  }
  int world = 0, rank = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (world != launch.world || rank != launch.rank) {
    return absl::FailedPreconditionError(absl::StrFormat(
        "the %s launcher announced rank %d of %d, but MPI sees rank %d of %d: the MPI library "
        "does not match the launcher (with srun, use --mpi=pmix or --mpi=pmi2 as the cluster "
        "supports; with mpirun, the Open MPI that anvil was built against)",
        launch.launcher, launch.rank, launch.world, rank, world));
  }
  ANVIL_ASSIGN_OR_RETURN(rt->comms_, create_mpi_group_comms(*rt->grid_, options));
  return rt;
}

ParallelRuntime::~ParallelRuntime() {
  comms_ = GroupComms{};  // MPI_Comm_free before MPI_Finalize; sockets before the store
  store_.reset();
  if (mpi_initialized_) {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) MPI_Finalize();
  }
}

void ParallelRuntime::abort(const std::string& message) const {
  abort_all_ranks(launch_.rank, message);
}

}  // namespace anvil::parallel
