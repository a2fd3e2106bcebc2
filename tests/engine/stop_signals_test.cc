// engine/stop_signals, each case in a forked child (the handlers are process-wide): a first
// SIGINT is recorded and announced at once with the step in flight, a second one exits with
// status 130; SIGTERM / SIGUSR1 are recorded (the first signal wins) and never exit; a SIGINT
// ignored before installation stays ignored; a signal is due after the step in flight when it
// arrived.
#include "engine/stop_signals.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <string>

#include "gtest/gtest.h"

namespace anvil::engine {
namespace {

struct ChildResult {
  int exit_code = -1;  // -1: did not exit normally
  std::string err;     // what the child wrote to stderr
};

// Runs `body` in a child whose stderr is captured and whose SIGINT has its default action; the
// child exits with body's return value.
ChildResult run_child(const std::function<int()>& body) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    ::dup2(fds[1], STDERR_FILENO);
    ::signal(SIGINT, SIG_DFL);  // whatever the test runner's disposition was
    ::_exit(body());
  }
  ::close(fds[1]);
  ChildResult r;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof(buf))) > 0;) r.err.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

TEST(StopSignals, FirstInterruptStopsAndAnnouncesSecondExits130) {
  const ChildResult r = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/true, /*saves=*/true);
    set_step_in_flight(12);
    if (stop_signal() != 0) return 2;
    ::raise(SIGINT);
    if (stop_signal() != SIGINT) return 3;
    ::raise(SIGINT);  // exits
    return 4;
  });
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_EQ(r.err,
            "\n[anvil] interrupted: saving a checkpoint at step 12, press Ctrl-C again to exit at "
            "once\n");
}

// The stop is due after the step the message named: a signal while step 12 was in flight stops
// after step 12; one after step 13 was announced (the train loop announces before it reads)
// stops after 13, not 12.
TEST(StopSignals, DueAfterTheStepInFlightWhenItArrived) {
  const ChildResult r = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/false, /*saves=*/true);
    set_step_in_flight(12);
    if (stop_signal_due(12) != 0) return 2;
    ::raise(SIGTERM);
    if (stop_signal_due(11) != 0 || stop_signal_due(12) != SIGTERM) return 3;
    return 0;
  });
  EXPECT_EQ(r.exit_code, 0);
  const ChildResult later = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/false, /*saves=*/true);
    set_step_in_flight(13);  // step 12 done, 13 announced, then the signal
    ::raise(SIGINT);
    if (stop_signal() != SIGINT || stop_signal_due(12) != 0) return 3;
    return stop_signal_due(13) == SIGINT ? 0 : 4;
  });
  EXPECT_EQ(later.exit_code, 0);
}

TEST(StopSignals, MessageWithoutSavingBeforeTraining) {
  const ChildResult r = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/true, /*saves=*/false);
    ::raise(SIGINT);
    return stop_signal() == SIGINT ? 0 : 3;
  });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err,
            "\n[anvil] interrupted: stopping after the first step (no [checkpoint] save), press "
            "Ctrl-C again to exit at once\n");
  const ChildResult later = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/true, /*saves=*/false);
    set_step_in_flight(1234567890123);
    ::raise(SIGINT);
    return 0;
  });
  EXPECT_EQ(later.err,
            "\n[anvil] interrupted: stopping after step 1234567890123 (no [checkpoint] save), "
            "press Ctrl-C again to exit at once\n");
}

TEST(StopSignals, QuietRankStillStopsAndExits) {
  const ChildResult r = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/false, /*saves=*/true);
    ::raise(SIGINT);
    if (stop_signal() != SIGINT) return 3;
    ::raise(SIGINT);
    return 4;
  });
  EXPECT_EQ(r.exit_code, 130);
  EXPECT_EQ(r.err, "");
}

TEST(StopSignals, TermAndUsr1AreRecordedFirstWinsNeverExit) {
  const ChildResult r = run_child([] {
    install_stop_signals();
    set_interrupt_message(/*announce=*/false, /*saves=*/true);
    ::raise(SIGUSR1);
    ::raise(SIGTERM);
    ::raise(SIGTERM);
    if (stop_signal() != SIGUSR1) return 3;
    ::raise(SIGINT);  // the first Ctrl-C: no exit, the first signal stays
    return stop_signal() == SIGUSR1 ? 0 : 5;
  });
  EXPECT_EQ(r.exit_code, 0);
}

TEST(StopSignals, IgnoredInterruptStaysIgnored) {
  const ChildResult r = run_child([] {
    ::signal(SIGINT, SIG_IGN);
    install_stop_signals();
    ::raise(SIGINT);
    ::raise(SIGINT);
    return stop_signal() == 0 ? 0 : 3;
  });
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.err, "");
}

TEST(StopSignals, Names) {
  EXPECT_STREQ(stop_signal_name(SIGTERM), "SIGTERM");
  EXPECT_STREQ(stop_signal_name(SIGUSR1), "SIGUSR1");
  EXPECT_STREQ(stop_signal_name(SIGINT), "SIGINT");
  EXPECT_STREQ(stop_signal_name(SIGHUP), "a signal");
}

}  // namespace
}  // namespace anvil::engine
