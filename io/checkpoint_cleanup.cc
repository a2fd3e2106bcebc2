// Stale DIR/step_X.tmp-<pid> directories of interrupted saves (see io/checkpoint_cleanup.h).
#include "io/checkpoint_cleanup.h"

#include <signal.h>

#include <cerrno>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace anvil::io {
namespace {

namespace fs = std::filesystem;

// The pid of "step_%08d.tmp-<pid>" (a directory) or "latest.tmp-<pid>" (a file, what
// write_file_atomic writes `latest` through), or -1 for any other name or kind.
int64_t temp_owner(const fs::directory_entry& e) {
  const std::string name = e.path().filename().string();
  absl::string_view rest = name;
  if (absl::ConsumePrefix(&rest, "step_")) {
    int64_t step = 0;
    if (rest.size() <= 8 || !absl::SimpleAtoi(rest.substr(0, 8), &step) || step < 0 ||
        !e.is_directory()) {
      return -1;
    }
    rest.remove_prefix(8);
  } else if (!absl::ConsumePrefix(&rest, "latest") || !e.is_regular_file()) {
    return -1;
  }
  int64_t pid = 0;
  if (!absl::ConsumePrefix(&rest, ".tmp-") || !absl::SimpleAtoi(rest, &pid) || pid <= 0) {
    return -1;
  }
  return pid;
}

bool process_gone(int64_t pid) { return ::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH; }

}  // namespace

absl::StatusOr<std::vector<std::string>> remove_stale_checkpoint_temps(
    const std::string& dir, const std::string& own_token) {
  std::vector<std::string> removed;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const int64_t pid = temp_owner(*it);
    if (pid < 0 || absl::StrCat(pid) == own_token || !process_gone(pid)) continue;
    std::error_code rm;
    fs::remove_all(it->path(), rm);
    if (rm) {
      return absl::DataLossError(
          absl::StrCat(it->path().string(),
                       ": cannot remove the leftover of an interrupted save: ", rm.message()));
    }
    removed.push_back(it->path().string());
  }
  if (ec) return absl::DataLossError(absl::StrCat(dir, ": cannot list: ", ec.message()));
  return removed;
}

}  // namespace anvil::io
