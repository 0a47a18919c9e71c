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

void install_stop_signal_handlers() {
  struct sigaction action {};
  action.sa_handler = record_stop_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

int pending_stop_signal() { return g_signal; }

const char* stop_signal_name(int signal) {
  return signal == SIGINT ? "SIGINT" : signal == SIGTERM ? "SIGTERM" : "a signal";
}

int stop_signal_count() { return g_count; }

}  // namespace titan
