#include "instruments/layer_window.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace titan {
namespace {

// "layers.3" for block 3, other parts as named.
std::string display_name(const std::string& part) {
  const bool block = !part.empty() && std::all_of(part.begin(), part.end(),
                                                  [](char c) { return c >= '0' && c <= '9'; });
  return block ? "layers." + part : part;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One part's series over the window, in step order.
struct PartSeries {
  std::string name;
  std::vector<int64_t> steps;
  std::vector<double> update, grad;
};

std::vector<PartSeries> by_part(const std::vector<LayerNormsAt>& window) {
  std::vector<PartSeries> parts;
  for (const auto& at : window) {
    for (size_t i = 0; i < at.parts.size(); ++i) {
      if (parts.size() <= i) parts.push_back(PartSeries{at.parts[i].name, {}, {}, {}});
      parts[i].steps.push_back(at.step);
      parts[i].update.push_back(at.parts[i].update_norm);
      parts[i].grad.push_back(at.parts[i].grad_norm);
    }
  }
  return parts;
}

// The first step (from the third on) whose update exceeds the factor times the median of the
// steps before it.
std::optional<size_t> first_growth(const PartSeries& s) {
  for (size_t i = 2; i < s.update.size(); ++i) {
    const double base = median({s.update.begin(), s.update.begin() + static_cast<long>(i)});
    if (base > 0 && s.update[i] > kUpdateGrowthFactor * base) return i;
  }
  return std::nullopt;
}

double ratio_to_median_before(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double base = median({v.begin(), v.end() - 1});
  return base > 0 ? v.back() / base : 0;
}

}  // namespace

void LayerWindow::add(int64_t step, std::vector<PartNorms> parts) {
  steps_.push_back(LayerNormsAt{step, std::move(parts)});
  while (steps_.size() > capacity_) steps_.pop_front();
}

std::string format_layer_window(const std::vector<LayerNormsAt>& window) {
  if (window.empty()) return "";
  const std::vector<PartSeries> parts = by_part(window);
  std::string out = fmt::format(
      "per-layer norms over steps {}-{} (at step {}, and x its median over the steps before):\n",
      window.front().step, window.back().step, window.back().step);
  out += fmt::format("  {:<16} {:>12} {:>8} {:>12} {:>8}  {}\n", "part", "update_norm", "x",
                     "grad_norm", "x", "update grew past 2x at");
  const PartSeries* first = nullptr;
  size_t first_at = 0;
  double first_ratio = 0;
  for (const PartSeries& s : parts) {
    const auto grew = first_growth(s);
    out += fmt::format("  {:<16} {:>12.6g} {:>8.3g} {:>12.6g} {:>8.3g}  {}\n", display_name(s.name),
                       s.update.back(), ratio_to_median_before(s.update), s.grad.back(),
                       ratio_to_median_before(s.grad),
                       grew ? fmt::format("step {}", s.steps[*grew]) : "-");
    if (!grew) continue;
    const double ratio =
        s.update[*grew] / median({s.update.begin(), s.update.begin() + static_cast<long>(*grew)});
    if (!first || *grew < first_at || (*grew == first_at && ratio > first_ratio)) {
      first = &s;
      first_at = *grew;
      first_ratio = ratio;
    }
  }
  out += first ? fmt::format("updates grew first: {} (step {}, {:.3g}x its median before)\n",
                             display_name(first->name), first->steps[first_at], first_ratio)
               : "updates grew first: none grew past 2x its median in the window\n";
  return out;
}

}  // namespace titan
