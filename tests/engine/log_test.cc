// Logging: who prints what (rank filtering, prefixes), duration and size formatting, and the
// progress bar's non-terminal mode (stderr captured by gtest is a file, not a TTY).
#include "engine/log.h"

#include <algorithm>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace anvil::engine {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;
using ::testing::StartsWith;

TEST(FormatTest, Duration) {
  EXPECT_EQ(format_duration(0), "0.0s");
  EXPECT_EQ(format_duration(12.34), "12.3s");
  EXPECT_EQ(format_duration(59.9), "59.9s");
  EXPECT_EQ(format_duration(59.96), "1m00s");  // never "60.0s"
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3599.4), "59m59s");
  EXPECT_EQ(format_duration(3599.6), "1h00m");  // never "60m00s"
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(100 * 3600 + 5 * 60), "100h05m");
  EXPECT_EQ(format_duration(-2.5), "-2.5s");
  EXPECT_EQ(format_duration(1.0 / 0.0), "?");
}

TEST(FormatTest, Bytes) {
  EXPECT_EQ(format_bytes(0), "0 B");
  EXPECT_EQ(format_bytes(100), "100 B");
  EXPECT_EQ(format_bytes(1023), "1023 B");
  EXPECT_EQ(format_bytes(1024), "1 KiB");
  EXPECT_EQ(format_bytes(12 * 1024), "12 KiB");
  EXPECT_EQ(format_bytes(1536), "1.5 KiB");
  EXPECT_EQ(format_bytes(512.0 * 1024 * 1024), "512 MiB");
  EXPECT_EQ(format_bytes(1.23 * 1024 * 1024 * 1024), "1.23 GiB");
  EXPECT_EQ(format_bytes(141.0 * 1024 * 1024 * 1024), "141 GiB");
  EXPECT_EQ(format_bytes(1023.9 * 1024), "1 MiB");  // not "1024 KiB"
  EXPECT_EQ(format_bytes(2.0 * 1024 * 1024 * 1024 * 1024), "2 TiB");
  EXPECT_EQ(format_bytes(-2048), "-2 KiB");
}

TEST(LogTest, InfoOnlyOnRankZeroUnlessAllRanks) {
  ::testing::internal::CaptureStderr();
  log_info(LogContext{0, 4, false}, "hello");
  std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, ContainsRegex("^\\[anvil [0-9][0-9]:[0-9][0-9]:[0-9][0-9]\\] hello\n$"));

  ::testing::internal::CaptureStderr();
  log_info(LogContext{3, 4, false}, "hidden");
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());

  ::testing::internal::CaptureStderr();
  log_info(LogContext{3, 4, true}, "from three");
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              ContainsRegex("^\\[anvil r3 [0-9:]+\\] from three\n$"));
}

TEST(LogTest, WarningsOnEveryRank) {
  ::testing::internal::CaptureStderr();
  log_warning(LogContext{3, 8, false}, "slow disk");
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              ContainsRegex("^\\[anvil r3 [0-9:]+\\] WARNING: slow disk\n$"));
  ::testing::internal::CaptureStderr();
  log_warning(LogContext{}, "single process");
  EXPECT_THAT(::testing::internal::GetCapturedStderr(),
              ContainsRegex("^\\[anvil [0-9:]+\\] WARNING: single process\n$"));
}

TEST(ProgressBarTest, NonTerminalPrintsFirstAndFinalLineOnly) {
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("tokenize", 1000);
    for (uint64_t i = 1; i <= 1000; ++i) bar.update(i, i / 10);
    bar.finish();
    bar.finish();  // idempotent
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(out.find('\r'), std::string::npos);
  // One line at the first update, none within 5 s after, then the final one.
  ASSERT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
  EXPECT_THAT(out, StartsWith("tokenize [......"));
  const std::string last = out.substr(out.find('\n') + 1);
  EXPECT_THAT(last, StartsWith("tokenize [##############################] 100% 1000 B/1000 B"));
  EXPECT_THAT(last, HasSubstr(" docs/s"));
  EXPECT_THAT(last, HasSubstr("  in "));
}

TEST(ProgressBarTest, UnknownTotalAndDisabled) {
  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("scan", 0);
    bar.update(3 * 1024 * 1024, 0);
    bar.finish();
  }
  const std::string out = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(out, StartsWith("scan 3 MiB  "));
  EXPECT_THAT(out, Not(HasSubstr("%")));
  EXPECT_THAT(out, Not(HasSubstr("ETA")));

  ::testing::internal::CaptureStderr();
  {
    ProgressBar bar("quiet", 10, /*enabled=*/false);
    bar.update(5, 1);
    bar.finish();
  }
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), IsEmpty());
}

}  // namespace
}  // namespace anvil::engine
