// The communicator a trainer uses for one process group (TP, PP, DP, embedding): on the CPU the
// group's CPU communicator (MPI, or TCP under torchrun); on CUDA an NcclComm bootstrapped
// through the rendezvous store (torchrun) or over the CPU communicator (MPI), owned by the
// caller's `owned` list. Shared by the GPT Trainer and the T5 trainer.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "parallel/comm.h"
#include "parallel/grid.h"

namespace anvil::parallel {

class TcpStore;

// group: the group's members; cpu: its CPU communicator (null without a launcher); store: the
// torchrun store or null; rank: this process's global rank. FailedPrecondition on the CPU
// without a CPU communicator, naming the group and `hint`.
absl::StatusOr<Comm*> group_comm(const ProcessGroup& group, Comm* cpu, TcpStore* store, int rank,
                                 bool cuda, const CommOptions& opt, const std::string& hint,
                                 std::vector<std::unique_ptr<Comm>>* owned);

}  // namespace anvil::parallel
