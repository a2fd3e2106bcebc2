// Where the dataset index caches live and how they are written (shared by the GPT index and
// the BERT/T5 sample mappings): next to the data as Megatron puts them, or in a cache directory;
// each file is written whole under a temporary name and renamed (write_npy), with the
// temporaries of an interrupted earlier build removed first and SIGINT/SIGTERM/SIGHUP deferred
// while the files are written, so a reader never sees half a cache.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "engine/log.h"
#include "io/npy.h"

namespace anvil::io {

// "{cache_dir or dirname(data_prefix)}/{basename(data_prefix)}": the start of every cache name.
std::string index_cache_base(const std::string& data_prefix, const std::string& cache_dir);

// Writes each (path, array) pair, creating `cache_dir` first when it is not empty. Logs the
// stale temporaries it removes (prefixed with `name`, the split). The first failure is returned;
// the files written before it stay (each one is complete).
absl::Status write_index_cache(const std::vector<std::pair<std::string, const NpyArray*>>& files,
                               const std::string& cache_dir, const std::string& name,
                               const engine::LogContext& log);

}  // namespace anvil::io
