// Leftovers of interrupted checkpoint saves: a save writes into DIR/step_X.tmp-<token>
// (io/checkpoint.h, token = the process id of rank 0) and renames it when complete, so a save
// killed midway leaves that directory behind. It is never loaded, but it holds a whole
// checkpoint's bytes; remove_stale_checkpoint_temps deletes the ones no live process owns.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

// Removes every DIR/step_%08d.tmp-<pid> whose pid is not `own_token` and names no running
// process on this host (kill(pid, 0) fails with ESRCH); tokens that are not process ids are
// left alone. Returns the removed paths. Called by rank 0 after a completed save (a second job
// saving into the same DIR from this host keeps its directory while it runs).
absl::StatusOr<std::vector<std::string>> remove_stale_checkpoint_temps(
    const std::string& dir, const std::string& own_token);

}  // namespace anvil::io
