// SIGTERM and SIGINT as a request to stop between training steps, rather than a kill mid-write.
#pragma once

namespace titan {

// Installs handlers that record SIGTERM and SIGINT (the first one received wins) and unblocks
// both, so that one already pending at exec (a blocked mask is inherited) is recorded at once.
// Safe before any static initializer (titan-train calls it from .preinit_array): a signal at any
// moment after exec is recorded, never the default kill. Idempotent.
void record_stop_signals();

// For a process about to replace itself by execv, after record_stop_signals() (else nothing):
// blocks SIGTERM and SIGINT and makes a signal recorded so far pending again, so that the new
// image's record_stop_signals() receives it. The new image must unblock them (it does when it
// calls record_stop_signals()).
// `unblock_after_failed_exec()` undoes the blocking when execv returned.
void hold_stop_signals_across_exec();
void unblock_after_failed_exec();

// record_stop_signals(), and ignores SIGPIPE so that a closed console pipe
// (`titan-train ... | head`) fails writes instead of killing the run. Idempotent.
void install_stop_signal_handlers();

// For the commands that do not stop between steps (compare, export, --help, ...): SIGTERM and
// SIGINT get their default action back, and one recorded since exec is raised again, so that
// the process ends as it would have without record_stop_signals().
void restore_default_stop_signals();

// The signal received since install_stop_signal_handlers(), or 0.
int pending_stop_signal();

// "SIGTERM", "SIGINT", or "a signal" for any other number.
const char* stop_signal_name(int signal);

// How many SIGTERM and SIGINT have been received (a second one aborts a checkpoint save).
int stop_signal_count();

}  // namespace titan
