// The SIGBUS handler that names the mapped file (see sigbus_guard.h). The table is written
// under a mutex and read by the handler without locks: a slot's path and size are stored before
// its start address is published (release), and the start is cleared first on removal.
#include "io/sigbus_guard.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>

namespace anvil::io {
namespace {

constexpr int kSlots = 256;
constexpr size_t kPathBytes = 512;

struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<size_t> bytes{0};
  char path[kPathBytes] = {};
};

Slot g_slots[kSlots];
std::mutex g_mu;  // registration only
struct sigaction g_previous;

// write(2) of a NUL-terminated string (async-signal-safe).
void say(const char* s) {
  size_t n = std::strlen(s);
  while (n > 0) {
    const ssize_t w = ::write(2, s, n);
    if (w <= 0) return;
    s += w;
    n -= static_cast<size_t>(w);
  }
}

// Decimal digits of v (async-signal-safe).
void say_number(uintptr_t v) {
  char buf[24];
  char* p = buf + sizeof(buf) - 1;
  *p = '\0';
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  say(p);
}

extern "C" void on_sigbus(int, siginfo_t* info, void*) {
  const uintptr_t addr = reinterpret_cast<uintptr_t>(info->si_addr);
  for (Slot& s : g_slots) {
    const uintptr_t begin = s.begin.load(std::memory_order_acquire);
    if (begin == 0 || addr < begin || addr - begin >= s.bytes.load()) continue;
    say("anvil: SIGBUS reading ");
    say(s.path);
    say(" at byte ");
    say_number(addr - begin);
    say(": the file is shorter than when it was opened (truncated or rewritten while in use)\n");
    break;
  }
  // Return with the previous disposition: the access faults again and ends the process as a
  // SIGBUS would have without this handler.
  ::sigaction(SIGBUS, &g_previous, nullptr);
}

void install_handler() {
  struct sigaction action = {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

void register_mapping(const void* data, size_t bytes, const std::string& path) {
  if (data == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  static std::once_flag installed;
  std::call_once(installed, install_handler);
  for (Slot& s : g_slots) {
    if (s.begin.load() != 0) continue;
    const size_t n = std::min(path.size(), kPathBytes - 1);
    std::memcpy(s.path, path.data(), n);
    s.path[n] = '\0';
    s.bytes.store(bytes);
    s.begin.store(reinterpret_cast<uintptr_t>(data), std::memory_order_release);
    return;
  }
}

void unregister_mapping(const void* data) {
  if (data == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mu);
  for (Slot& s : g_slots) {
    if (s.begin.load() == reinterpret_cast<uintptr_t>(data)) s.begin.store(0);
  }
}

}  // namespace anvil::io
