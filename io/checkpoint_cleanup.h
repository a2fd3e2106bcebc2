// Leftovers of interrupted checkpoint saves: a save writes into DIR/step_X.tmp-<token>
// (io/checkpoint.h, token = the process id of rank 0) and renames it when complete, and writes
// DIR/latest through DIR/latest.tmp-<pid>, so a save killed midway leaves one of them behind.
// They are never loaded, but a directory holds a whole checkpoint's bytes;
// remove_stale_checkpoint_temps deletes the ones no live process owns. (A save that fails
// without being killed removes its own: io/checkpoint.h.)
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

// Removes every directory DIR/step_%08d.tmp-<pid> and file DIR/latest.tmp-<pid> whose pid is
// not `own_token` and names no running process on this host (kill(pid, 0) fails with ESRCH);
// tokens that are not process ids are left alone. Returns the removed paths. Called by rank 0 at
// the start of a run that saves into DIR and after each completed save (a second job saving into
// the same DIR from this host keeps its directory while it runs).
absl::StatusOr<std::vector<std::string>> remove_stale_checkpoint_temps(
    const std::string& dir, const std::string& own_token);

}  // namespace anvil::io
