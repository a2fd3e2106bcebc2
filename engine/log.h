// Rank-aware logging and timing. By default only rank 0 prints (a 512-rank job would otherwise
// repeat every line 512 times); warnings and errors print on every rank, prefixed with it.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace anvil::engine {

struct LogContext {
  int rank = 0;
  int world = 1;
  bool all_ranks = false;  // info lines from every rank
};

// "[anvil 15:25:08] msg" on stderr (rank 0, or every rank when all_ranks; then "[anvil r3 ...").
void log_info(const LogContext& ctx, std::string_view msg);
// "[anvil r3 15:25:08] WARNING: msg" on every rank.
void log_warning(const LogContext& ctx, std::string_view msg);

// Wall-clock stopwatch.
class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void restart() { start_ = std::chrono::steady_clock::now(); }
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_;
};

// "1h02m", "3m05s", "12.3s".
std::string format_duration(double seconds);
// "1.23 GiB", "512 MiB", "12 KiB", "100 B".
std::string format_bytes(double bytes);

// A single-line progress bar on stderr for long jobs (preprocessing):
//   [#######.....] 58% 1.2 GB/2.1 GB  45.3 MB/s  12034 docs/s  ETA 20s
// Redraws at most 10 times a second; finish() prints the final line and a newline. With
// total == 0 (unknown size) it shows amounts and rates only. Not thread-safe: one owner.
class ProgressBar {
 public:
  ProgressBar(std::string label, uint64_t total_bytes, bool enabled = true);
  void update(uint64_t done_bytes, uint64_t done_items);
  void finish();

 private:
  void draw(bool final_line);
  std::string label_;
  uint64_t total_ = 0, done_ = 0, items_ = 0;
  bool enabled_;
  Timer timer_;
  double last_draw_ = -1.0;
};

}  // namespace anvil::engine
