// The two SpanRecorders of instruments/profiler.h, and the Chrome trace format.
#include <ATen/record_function.h>
#include <fmt/format.h>
#include <torch/csrc/autograd/profiler_kineto.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "instruments/profiler.h"
#include "util/env_switch.h"
#include "util/strings.h"

namespace titan {
namespace {

namespace tp = torch::autograd::profiler;
namespace tpi = torch::profiler::impl;

// KinetoEvent's times are in microseconds in libtorch 1.x and nanoseconds in later ones: the
// accessor that exists is used (the int overload wins where both do).
template <class E>
auto start_us(const E& e, int) -> decltype(e.startNs(), uint64_t()) {
  return e.startNs() / 1000;
}
template <class E>
uint64_t start_us(const E& e, long) {
  return e.startUs();
}
template <class E>
auto duration_us(const E& e, int) -> decltype(e.durationNs(), uint64_t()) {
  return e.durationNs() / 1000;
}
template <class E>
uint64_t duration_us(const E& e, long) {
  return e.durationUs();
}

const std::unordered_set<at::RecordScope> kScopes = {at::RecordScope::FUNCTION,
                                                     at::RecordScope::USER_SCOPE};

class LibtorchRecorder : public SpanRecorder {
 public:
  LibtorchRecorder() : config_(tpi::ProfilerState::KINETO) {}
  void start() override {
    tp::prepareProfiler(config_, {tpi::ActivityType::CPU});
    tp::enableProfiler(config_, {tpi::ActivityType::CPU}, kScopes);
  }
  std::vector<TraceSpan> stop() override {
    std::unique_ptr<tp::ProfilerResult> result = tp::disableProfiler();
    std::vector<TraceSpan> spans;
    for (const auto& e : result->events()) {
      TraceSpan s;
      s.name = e.name();
      s.category = e.scope() == static_cast<uint8_t>(at::RecordScope::USER_SCOPE)
                       ? "user_annotation"
                       : "cpu_op";
      s.start_us = start_us(e, 0);
      s.duration_us = duration_us(e, 0);
      s.thread = e.startThreadId();
      spans.push_back(std::move(s));
    }
    return spans;
  }
  const char* source() const override { return "libtorch's profiler"; }

 private:
  tpi::ProfilerConfig config_;
};

uint64_t now_us() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// at::RecordFunction callbacks of every thread, while recording.
class TitanRecorder : public SpanRecorder {
 public:
  void start() override {
    struct Start : at::ObserverContext {
      uint64_t at = 0;
    };
    active_ = this;
    handle_ = at::addGlobalCallback(
        at::RecordFunctionCallback(
            [](const at::RecordFunction&) -> std::unique_ptr<at::ObserverContext> {
              auto start = std::make_unique<Start>();
              start->at = now_us();
              return start;
            },
            [](const at::RecordFunction& fn, at::ObserverContext* context) {
              const auto* start = static_cast<Start*>(context);
              TraceSpan s;
              s.name = fn.name();
              s.category = fn.scope() == at::RecordScope::USER_SCOPE ? "user_annotation" : "cpu_op";
              s.start_us = start->at;
              s.duration_us = now_us() - start->at;
              s.thread = std::hash<std::thread::id>()(std::this_thread::get_id()) & 0xffffff;
              std::lock_guard<std::mutex> lock(active_->mutex_);
              active_->spans_.push_back(std::move(s));
            })
            .scopes(kScopes));
  }
  std::vector<TraceSpan> stop() override {
    at::removeCallback(handle_);
    std::lock_guard<std::mutex> lock(mutex_);
    return std::move(spans_);
  }
  const char* source() const override { return "titan-train's op recorder"; }

 private:
  static TitanRecorder* active_;
  at::CallbackHandle handle_ = 0;
  std::mutex mutex_;
  std::vector<TraceSpan> spans_;
};

TitanRecorder* TitanRecorder::active_ = nullptr;

// Whether libtorch's profiler starts here (it needs its collection compiled in).
bool libtorch_profiler_works() {
  try {
    LibtorchRecorder probe;
    probe.start();
    probe.stop();
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

}  // namespace

std::unique_ptr<SpanRecorder> make_span_recorder() {
  if (env_switch(EnvSwitch::kProfiler) == "libtorch" && libtorch_profiler_works())
    return std::make_unique<LibtorchRecorder>();
  return std::make_unique<TitanRecorder>();
}

std::string format_chrome_trace(const std::vector<TraceSpan>& spans, int64_t rank) {
  uint64_t origin = UINT64_MAX;
  for (const auto& s : spans) origin = std::min(origin, s.start_us);
  std::string out = "{\"traceEvents\": [\n";
  for (size_t i = 0; i < spans.size(); ++i) {
    const TraceSpan& s = spans[i];
    out += fmt::format(
        "  {{\"ph\": \"X\", \"cat\": {}, \"name\": {}, \"pid\": {}, \"tid\": {}, \"ts\": {}, "
        "\"dur\": {}}}{}\n",
        json_quoted(s.category), json_quoted(s.name), rank, s.thread, s.start_us - origin,
        s.duration_us, i + 1 < spans.size() ? "," : "");
  }
  return out + "], \"displayTimeUnit\": \"ms\"}\n";
}

}  // namespace titan
