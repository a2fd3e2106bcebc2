// Stop-signal handlers (engine/stop_signals.h). The handlers touch only lock-free atomics and
// call only async-signal-safe functions (write, _exit): the message is formatted by hand.
#include "engine/stop_signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstring>

namespace anvil::engine {
namespace {

std::atomic<int> g_signal{0};           // the first stop signal
std::atomic<int> g_interrupts{0};       // SIGINTs received
std::atomic<int64_t> g_step{0};         // step in flight (0: not training yet)
std::atomic<int64_t> g_signal_step{0};  // the step in flight when g_signal arrived
std::atomic<bool> g_announce{true};
std::atomic<bool> g_saves{false};

static_assert(std::atomic<int64_t>::is_always_lock_free, "signal handlers need lock-free atomics");

// Appends `s` to buf[*n] (bounded by cap).
void append(char* buf, size_t* n, size_t cap, const char* s) {
  for (; *s != '\0' && *n < cap; ++s) buf[(*n)++] = *s;
}

void append_int(char* buf, size_t* n, size_t cap, int64_t v) {
  char digits[24];
  int k = 0;
  uint64_t u = v < 0 ? 0 : static_cast<uint64_t>(v);
  do {
    digits[k++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u > 0);
  while (k > 0 && *n < cap) buf[(*n)++] = digits[--k];
}

void record(int sig) {
  // The step first: a reader that sees g_signal sees its step (both seq_cst).
  const int64_t step = g_step.load();
  int none = 0;
  if (g_signal.load() == 0) g_signal_step.store(step);
  g_signal.compare_exchange_strong(none, sig);
}

extern "C" void on_stop(int sig) { record(sig); }

extern "C" void on_interrupt(int sig) {
  if (g_interrupts.fetch_add(1) > 0) ::_exit(128 + SIGINT);
  record(sig);
  if (!g_announce.load()) return;
  char msg[256];
  size_t n = 0;
  const size_t cap = sizeof(msg);
  const int64_t step = g_step.load();
  // A newline first: the terminal has echoed "^C" on the current line.
  append(msg, &n, cap, "\n[anvil] interrupted: ");
  append(msg, &n, cap, g_saves.load() ? "saving a checkpoint " : "stopping ");
  if (step > 0) {
    append(msg, &n, cap, g_saves.load() ? "at step " : "after step ");
    append_int(msg, &n, cap, step);
  } else {
    append(msg, &n, cap, "after the first step");
  }
  if (!g_saves.load()) append(msg, &n, cap, " (no [checkpoint] save)");
  append(msg, &n, cap, ", press Ctrl-C again to exit at once\n");
  const ssize_t written = ::write(STDERR_FILENO, msg, n);
  (void)written;  // nothing to do about a closed stderr
}

void install(int sig, void (*handler)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;  // reads and writes in flight go on
  sigaction(sig, &sa, nullptr);
}

}  // namespace

void install_stop_signals() {
  install(SIGTERM, on_stop);
  install(SIGUSR1, on_stop);
  struct sigaction old;
  if (sigaction(SIGINT, nullptr, &old) == 0 && old.sa_handler == SIG_IGN) return;
  install(SIGINT, on_interrupt);
}

int stop_signal() { return g_signal.load(); }

int stop_signal_due(int64_t step_done) {
  const int sig = g_signal.load();
  return sig != 0 && g_signal_step.load() <= step_done ? sig : 0;
}

void set_interrupt_message(bool announce, bool saves) {
  g_announce.store(announce);
  g_saves.store(saves);
}

void set_step_in_flight(int64_t step) { g_step.store(step); }

const char* stop_signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

}  // namespace anvil::engine
