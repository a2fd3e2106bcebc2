// A trainer's communicator for one process group (see group_comm.h).
#include "model/group_comm.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "parallel/bootstrap.h"
#include "parallel/nccl_comm.h"

namespace anvil::model {

absl::StatusOr<parallel::Comm*> group_comm(const parallel::ProcessGroup& group, parallel::Comm* cpu,
                                           parallel::TcpStore* store, int rank, bool cuda,
                                           const parallel::CommOptions& opt,
                                           const std::string& hint,
                                           std::vector<std::unique_ptr<parallel::Comm>>* owned) {
  if (!cuda) {
    if (cpu == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Trainer: the %s group on the CPU needs a launcher: mpirun, srun or torchrun%s",
          group.name, hint));
    }
    return cpu;
  }
  parallel::BroadcastBytes bootstrap;
  if (store != nullptr) {
    bootstrap = parallel::broadcast_through(*store, group);
  } else if (cpu != nullptr) {
    bootstrap = parallel::broadcast_over(*cpu);
  }
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<parallel::NcclComm> c,
                         parallel::NcclComm::create(group, rank, bootstrap, opt));
  owned->push_back(std::move(c));
  return owned->back().get();
}

}  // namespace anvil::model
