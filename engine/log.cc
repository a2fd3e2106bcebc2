// Rank-aware log lines, human-readable durations and sizes, and a progress bar for long jobs.
// Every line is formatted first and written with one fwrite, so lines from several threads (or
// ranks sharing a terminal) do not interleave mid-line.
#include "engine/log.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace anvil::engine {
namespace {

void write_stderr(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

// "[anvil 15:25:08] " or, when several ranks may print, "[anvil r3 15:25:08] ".
std::string prefix(const LogContext& ctx, bool with_rank) {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char clock[16];
  std::strftime(clock, sizeof(clock), "%H:%M:%S", &local);
  return with_rank ? absl::StrCat("[anvil r", ctx.rank, " ", clock, "] ")
                   : absl::StrCat("[anvil ", clock, "] ");
}

// `v` with three significant digits and no trailing zeros: 1.23, 12, 512, 0.5.
std::string three_digits(double v) {
  std::string s = absl::StrFormat(v < 10 ? "%.2f" : v < 100 ? "%.1f" : "%.0f", v);
  if (s.find('.') != std::string::npos) {
    s.erase(s.find_last_not_of('0') + 1);
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

void log_info(const LogContext& ctx, std::string_view msg) {
  if (ctx.rank != 0 && !ctx.all_ranks) return;
  write_stderr(prefix(ctx, ctx.all_ranks && ctx.world > 1) + std::string(msg) + "\n");
}

void log_warning(const LogContext& ctx, std::string_view msg) {
  write_stderr(prefix(ctx, ctx.world > 1) + "WARNING: " + std::string(msg) + "\n");
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds)) return "?";
  if (seconds < 0) return "-" + format_duration(-seconds);
  // Thresholds are taken after rounding, so 59.96 s reads "1m00s", never "60.0s".
  if (seconds < 59.95) return absl::StrFormat("%.1fs", seconds);
  const long long total_s = std::llround(seconds);
  if (total_s < 3600) return absl::StrFormat("%lldm%02llds", total_s / 60, total_s % 60);
  const long long total_m = std::llround(seconds / 60);
  return absl::StrFormat("%lldh%02lldm", total_m / 60, total_m % 60);
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "?";
  if (bytes < 0) return "-" + format_bytes(-bytes);
  static const char* const kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  constexpr int kLast = sizeof(kUnits) / sizeof(kUnits[0]) - 1;
  if (bytes < 1023.5) return absl::StrFormat("%.0f B", bytes);
  double v = bytes;
  int unit = 0;
  // Step up while the value would print as 1024 or more ("1024 KiB" reads "1 MiB").
  while (v >= 1023.5 && unit < kLast) {
    v /= 1024;
    ++unit;
  }
  return absl::StrCat(three_digits(v), " ", kUnits[unit]);
}

ProgressBar::ProgressBar(std::string label, uint64_t total_bytes, bool enabled)
    : label_(std::move(label)), total_(total_bytes), enabled_(enabled) {}

void ProgressBar::update(uint64_t done_bytes, uint64_t done_items) {
  if (!enabled_) return;
  done_ = done_bytes;
  items_ = done_items;
  // A terminal gets a live bar; a log file (batch job) a line every 5 s, not thousands of '\r'.
  const double interval = isatty(2) ? 0.1 : 5.0;
  if (last_draw_ < 0 || timer_.seconds() - last_draw_ >= interval) draw(false);
}

void ProgressBar::finish() {
  if (!enabled_) return;
  draw(true);
  enabled_ = false;  // a second finish() (or a late update()) prints nothing
}

void ProgressBar::draw(bool final_line) {
  const double elapsed = timer_.seconds();
  last_draw_ = elapsed;
  const bool tty = isatty(2);
  const double rate = elapsed > 0 ? done_ / elapsed : 0.0;
  const double item_rate = elapsed > 0 ? items_ / elapsed : 0.0;
  std::string line = label_.empty() ? "" : label_ + " ";
  if (total_ > 0) {
    constexpr int kWidth = 30;
    const double fraction = std::min(1.0, static_cast<double>(done_) / total_);
    const int filled = static_cast<int>(fraction * kWidth);
    absl::StrAppend(&line, "[", std::string(filled, '#'), std::string(kWidth - filled, '.'), "] ",
                    static_cast<int>(fraction * 100), "% ", format_bytes(done_), "/",
                    format_bytes(total_));
  } else {
    absl::StrAppend(&line, format_bytes(done_));
  }
  absl::StrAppend(&line, "  ", format_bytes(rate), "/s");
  if (items_ > 0) absl::StrAppend(&line, "  ", absl::StrFormat("%.0f", item_rate), " docs/s");
  if (final_line) {
    absl::StrAppend(&line, "  in ", format_duration(elapsed));
  } else if (total_ > 0 && rate > 0 && done_ < total_) {
    absl::StrAppend(&line, "  ETA ", format_duration((total_ - done_) / rate));
  }
  if (tty) {
    // Clear to the end of the line (ESC [K) so a shorter line hides the previous one.
    write_stderr(absl::StrCat("\r", line, "\x1b[K", final_line ? "\n" : ""));
  } else {
    write_stderr(line + "\n");
  }
}

}  // namespace anvil::engine
