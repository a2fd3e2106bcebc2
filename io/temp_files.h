// Temporary names of files that are written whole and then renamed into place (datasets,
// index caches): PATH.tmp.HOST.PID, and the removal of the temporaries that an interrupted or
// killed process left behind. HOST keeps nodes sharing a filesystem apart: a temporary is stale
// only when it was made on this host by a process that no longer runs.
#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace anvil::io {

// PATH.tmp.HOST.PID for this process.
std::string temp_path(const std::string& path);

// Removes the temporaries of `path` left by dead processes of this host: PATH.tmp.HOST.PID and
// PATH.tmp.HOST.PID.N, and the older host-less PATH.tmp.PID[.N] (taken to be this host's).
// Returns the removed paths (for the log); a missing directory is not an error.
absl::StatusOr<std::vector<std::string>> remove_stale_temps(const std::string& path);

}  // namespace anvil::io
