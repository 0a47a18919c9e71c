#include "util/stop_signal.h"

#include <csignal>

namespace titan {
namespace {

volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_count = 0;

extern "C" void record_stop_signal(int signal) {
  if (g_signal == 0) g_signal = signal;
  if (g_count < 1000) g_count = g_count + 1;
}

}  // namespace

void record_stop_signals() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
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
