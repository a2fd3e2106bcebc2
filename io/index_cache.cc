// Index cache paths and atomic writes (see index_cache.h).
#include "io/index_cache.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "io/temp_files.h"

namespace anvil::io {

std::string index_cache_base(const std::string& data_prefix, const std::string& cache_dir) {
  const size_t slash = data_prefix.rfind('/');
  const std::string dir =
      slash == std::string::npos ? std::string(".") : data_prefix.substr(0, slash);
  const std::string base = slash == std::string::npos ? data_prefix : data_prefix.substr(slash + 1);
  return absl::StrCat(cache_dir.empty() ? dir : cache_dir, "/", base);
}

absl::Status write_index_cache(const std::vector<std::pair<std::string, const NpyArray*>>& files,
                               const std::string& cache_dir, const std::string& name,
                               const engine::LogContext& log) {
  if (!cache_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(cache_dir, ec);
    if (ec) {
      return absl::PermissionDeniedError(
          absl::StrCat("cannot create ", cache_dir, ": ", ec.message()));
    }
  }
  // SIGINT/SIGTERM/SIGHUP while the files are written take effect after the temporaries are
  // renamed or removed (a SIGKILL leaves them to the next build, below).
  const DeferredSignals defer;
  // Temporaries of an index build that was killed while saving: removed, and said so.
  for (const auto& [path, array] : files) {
    auto removed = remove_stale_temps(path);
    if (!removed.ok()) return removed.status();
    for (const std::string& r : *removed) {
      engine::log_warning(
          log, absl::StrCat(name, ": removed ", r, ", left by an interrupted index build"));
    }
  }
  for (const auto& [path, array] : files) {
    const absl::Status s = array->save(path);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace anvil::io
