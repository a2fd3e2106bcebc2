// Temporary names of files that are written whole and then renamed into place (datasets,
// index caches): PATH.tmp.HOST.PID, the removal of the temporaries that an interrupted or
// killed process left behind, and DeferredSignals, which keeps SIGINT/SIGTERM/SIGHUP from
// ending a process while it holds temporaries. HOST keeps nodes sharing a filesystem apart: a
// temporary is stale only when it was made on this host by a process that no longer runs.
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

// While one is alive, SIGINT, SIGTERM and SIGHUP only set a flag. The last one to end restores
// the previous dispositions and raises the signals that arrived, which then act as they would
// have (end the process, or reach the program's own handler) once the temporaries of the
// section are renamed or removed. Nestable and thread-safe; for short sections (file writes).
class DeferredSignals {
 public:
  DeferredSignals();
  ~DeferredSignals();
  DeferredSignals(const DeferredSignals&) = delete;
  DeferredSignals& operator=(const DeferredSignals&) = delete;
};

}  // namespace anvil::io
