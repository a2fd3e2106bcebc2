// Temporary file names with host and pid, and the removal of stale ones (see temp_files.h).
#include "io/temp_files.h"

#include <dirent.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace anvil::io {
namespace {

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

// The pid of "PID" or "PID.N" (all digits), or 0.
pid_t parse_pid_suffix(absl::string_view s) {
  const std::vector<absl::string_view> parts = absl::StrSplit(s, '.');
  if (parts.empty() || parts.size() > 2) return 0;
  for (const absl::string_view p : parts) {
    if (p.empty()) return 0;
    for (const char c : p) {
      if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return 0;
    }
  }
  int pid = 0;
  return absl::SimpleAtoi(parts[0], &pid) && pid > 0 ? pid : 0;
}

bool process_alive(pid_t pid) {
  if (pid == ::getpid()) return true;
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

}  // namespace

std::string temp_path(const std::string& path) {
  return absl::StrCat(path, ".tmp.", host_name(), ".", ::getpid());
}

absl::StatusOr<std::vector<std::string>> remove_stale_temps(const std::string& path) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string prefix =
      absl::StrCat(slash == std::string::npos ? path : path.substr(slash + 1), ".tmp.");
  const std::string host = host_name() + ".";
  std::vector<std::string> removed;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) {
    if (errno == ENOENT) return removed;
    return absl::InternalError(absl::StrCat(dir, ": cannot list: ", std::strerror(errno)));
  }
  absl::Status status;
  while (const dirent* e = ::readdir(d)) {
    absl::string_view name = e->d_name;
    if (!absl::ConsumePrefix(&name, prefix)) continue;
    // This host's "HOST.PID[.N]", or an older "PID[.N]"; other hosts' names do not parse.
    absl::ConsumePrefix(&name, host);
    const pid_t pid = parse_pid_suffix(name);
    if (pid == 0 || process_alive(pid)) continue;
    const std::string stale = absl::StrCat(slash == std::string::npos ? "" : dir, e->d_name);
    if (::unlink(stale.c_str()) != 0 && errno != ENOENT) {
      status = absl::PermissionDeniedError(
          absl::StrCat(stale, ": cannot remove this stale temporary: ", std::strerror(errno)));
      break;
    }
    removed.push_back(stale);
  }
  ::closedir(d);
  if (!status.ok()) return status;
  return removed;
}

}  // namespace anvil::io
