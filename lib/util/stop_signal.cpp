#include "util/stop_signal.h"

#include <signal.h>

#include <csignal>

namespace titan {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_count = 0;
bool g_recording = false;  // record_stop_signals() ran in this image

extern "C" void record_stop_signal(int signal) {
  if (g_signal == 0) g_signal = signal;
  if (g_count < 1000) g_count = g_count + 1;
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

void record_stop_signals() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  const sigset_t stop_signals = stop_signal_set();
  sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);
  g_recording = true;
}

void hold_stop_signals_across_exec() {
  // Only an image that records them hands them on: another (the test binary) would pass the
  // blocked mask to its children, which never see a SIGTERM then.
  if (!g_recording) return;
  const sigset_t stop_signals = stop_signal_set();
  sigprocmask(SIG_BLOCK, &stop_signals, nullptr);
  // Sent to this thread, where it is blocked (libraries' threads may have it unblocked and would
  // take a process-wide one): pending, and execve keeps it.
  if (g_signal != 0) std::raise(g_signal);
}

void unblock_after_failed_exec() {
  if (!g_recording) return;
  const sigset_t stop_signals = stop_signal_set();
  sigprocmask(SIG_UNBLOCK, &stop_signals, nullptr);
}

void install_stop_signal_handlers() {
  record_stop_signals();
  std::signal(SIGPIPE, SIG_IGN);
}

void restore_default_stop_signals() {
  std::signal(SIGTERM, SIG_DFL);
  std::signal(SIGINT, SIG_DFL);
  if (g_signal != 0) std::raise(g_signal);
}

int pending_stop_signal() { return g_signal; }

const char* stop_signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

int stop_signal_count() { return g_count; }

}  // namespace titan
