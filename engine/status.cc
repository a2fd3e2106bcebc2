// Fatal-error reporting shared by every ANVIL_*CHECK macro.
#include "engine/status.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "engine/cuda_check.h"

namespace anvil::engine {
namespace {
std::atomic<int> g_rank{0};
std::atomic<bool> g_sync_check{false};
}  // namespace

void set_process_rank(int rank) { g_rank = rank; }
bool sync_check_enabled() { return g_sync_check.load(std::memory_order_relaxed); }
void set_sync_check(bool enabled) { g_sync_check = enabled; }

void check_failed(const char* file, int line, const char* what, const std::string& detail) {
  std::fprintf(stderr, "[anvil rank %d] %s:%d: CHECK failed: %s%s%s\n", g_rank.load(), file, line,
               what, detail.empty() ? "" : ": ", detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace anvil::engine
