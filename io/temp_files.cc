// Temporary file names with host and pid, the removal of stale ones, and the deferral of
// termination signals (see temp_files.h).
#include "io/temp_files.h"

#include <dirent.h>
#include <signal.h>
#include <sys/types.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>

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

// DeferredSignals' shared state: the sections open, the dispositions they replaced, and the
// signals that arrived meanwhile.
constexpr int kDeferred[] = {SIGINT, SIGTERM, SIGHUP};
constexpr int kNumDeferred = 3;

std::mutex g_defer_mu;
int g_defer_depth = 0;  // sections open
struct sigaction g_defer_previous[kNumDeferred];
std::atomic<int> g_defer_pending[kNumDeferred];
static_assert(std::atomic<int>::is_always_lock_free, "used in a signal handler");

extern "C" void on_deferred_signal(int sig) {
  for (int i = 0; i < kNumDeferred; ++i) {
    if (kDeferred[i] == sig) g_defer_pending[i].fetch_add(1);
  }
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

DeferredSignals::DeferredSignals() {
  std::lock_guard<std::mutex> lock(g_defer_mu);
  if (g_defer_depth++ > 0) return;
  struct sigaction action = {};
  action.sa_handler = on_deferred_signal;
  action.sa_flags = SA_RESTART;
  sigemptyset(&action.sa_mask);
  for (int i = 0; i < kNumDeferred; ++i) ::sigaction(kDeferred[i], &action, &g_defer_previous[i]);
}

DeferredSignals::~DeferredSignals() {
  std::lock_guard<std::mutex> lock(g_defer_mu);
  if (--g_defer_depth > 0) return;
  for (int i = 0; i < kNumDeferred; ++i) ::sigaction(kDeferred[i], &g_defer_previous[i], nullptr);
  for (int i = 0; i < kNumDeferred; ++i) {
    if (g_defer_pending[i].exchange(0) > 0) ::raise(kDeferred[i]);
  }
}

}  // namespace anvil::io
