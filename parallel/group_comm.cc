// A trainer's communicator for one process group (see group_comm.h).
#include "parallel/group_comm.h"

#include <utility>

#include "absl/strings/str_format.h"
#include "engine/status.h"
#include "parallel/bootstrap.h"
#include "parallel/nccl_comm.h"

namespace anvil::parallel {

absl::StatusOr<Comm*> group_comm(const ProcessGroup& group, Comm* cpu, TcpStore* store, int rank,
                                 bool cuda, const CommOptions& opt, const std::string& hint,
                                 std::vector<std::unique_ptr<Comm>>* owned) {
  if (!cuda) {
    if (cpu == nullptr) {
      return absl::FailedPreconditionError(absl::StrFormat(
          "Trainer: the %s group on the CPU needs a launcher: mpirun, srun or torchrun%s",
          group.name, hint));
    }
    return cpu;
  }
  BroadcastBytes bootstrap;
  if (store != nullptr) {
    bootstrap = broadcast_through(*store, group);
  } else if (cpu != nullptr) {
    bootstrap = broadcast_over(*cpu);
  }
  ANVIL_ASSIGN_OR_RETURN(std::unique_ptr<NcclComm> c,
                         NcclComm::create(group, rank, bootstrap, opt));
  owned->push_back(std::move(c));
  return owned->back().get();
}

}  // namespace anvil::parallel
