// Graceful stops of a long run (bin/train). SIGTERM, SIGUSR1 (SLURM's preemption notices) and a
// first SIGINT (Ctrl-C) only record the signal: the run finishes its step, saves a checkpoint
// and exits 0 (the caller polls stop_signal() between steps). A second SIGINT ends the process
// at once with status 130 (128 + SIGINT, what a shell reports for Ctrl-C), even mid-save:
// checkpoints are written under a temporary name and renamed when complete, so none is left
// half-written under its final name.
// The first SIGINT prints at once on stderr (when announcing):
//   "[anvil] interrupted: saving a checkpoint at step N, press Ctrl-C again to exit at once"
// (without saving: "stopping after step N (no [checkpoint] save)"), N the step in flight.
// A SIGINT that is ignored when install_stop_signals() runs stays ignored (a job started in the
// background of a script, as other programs do).
#pragma once

#include <cstdint>

namespace anvil::engine {

// Installs the handlers (once per process, before any other thread starts).
void install_stop_signals();
// The first stop signal received (SIGTERM, SIGUSR1 or SIGINT), 0 while none.
int stop_signal();
// The first stop signal if the run must stop after step `step_done`: it arrived while step
// step_done or an earlier one was in flight (set_step_in_flight), as its message said; 0
// otherwise (none yet, or it arrived after the next step was announced: stop after that one).
int stop_signal_due(int64_t step_done);
// What the first SIGINT's message says: whether it is printed (one rank of many), whether a
// checkpoint will be saved, and the step in flight (0: training has not started).
void set_interrupt_message(bool announce, bool saves);
void set_step_in_flight(int64_t step);
// "SIGTERM", "SIGUSR1", "SIGINT" or "a signal".
const char* stop_signal_name(int sig);

}  // namespace anvil::engine
