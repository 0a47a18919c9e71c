// SIGTERM and SIGINT as a request to stop between training steps, rather than a kill mid-write.
#pragma once

namespace titan {

// Installs handlers that record SIGTERM and SIGINT (the first one received wins), and ignores
// SIGPIPE so that a closed console pipe (`titan-train ... | head`) fails writes instead of
// killing the run. Idempotent.
void install_stop_signal_handlers();

// The signal received since install_stop_signal_handlers(), or 0.
int pending_stop_signal();

// "SIGTERM", "SIGINT", or "a signal" for any other number.
const char* stop_signal_name(int signal);

// How many SIGTERM and SIGINT have been received (a second one aborts a checkpoint save).
int stop_signal_count();

}  // namespace titan
