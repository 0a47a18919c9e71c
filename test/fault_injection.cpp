#include "fault_injection.h"

#include <ATen/record_function.h>

#include <cmath>

#include "model/observed_op.h"

namespace titan::test {
namespace {

enum class Fault { kNone, kUlp, kInfinity };

class PlantedFault : public BlockOutputHook {
 public:
  PlantedFault(int64_t step, int64_t layer, Fault fault, bool once)
      : step_(step), layer_(layer), fault_(fault), once_(once) {}

  void on_block_output(int64_t step, int64_t layer, at::Tensor& output) override {
    if (step != step_ || layer != layer_) return;
    const bool fire = !(once_ && fired_);
    fired_ = true;
    const Fault fault = fire ? fault_ : Fault::kNone;
    at::Tensor x = output.detach();
    if (fault_ == Fault::kInfinity) {  // the same ops whether it fires or not
      at::Tensor delta;
      {
        at::DisableRecordFunctionGuard not_traced;
        at::NoGradGuard no_grad;
        delta = at::zeros_like(x);
        if (fault == Fault::kInfinity) delta.view(-1)[0] = INFINITY;
      }
      output = output + delta;
      return;
    }
    at::Tensor target;
    {
      at::DisableRecordFunctionGuard not_traced;
      at::NoGradGuard no_grad;
      target = fault == Fault::kUlp ? at::full_like(output, INFINITY) : x;
    }
    output = output + (at::nextafter(x, target) - x);
  }

 private:
  int64_t step_, layer_;
  Fault fault_;
  bool once_;
  bool fired_ = false;
};

}  // namespace

std::shared_ptr<BlockOutputHook> ulp_perturbation(int64_t step, int64_t layer, int ulps,
                                                  bool once) {
  return std::make_shared<PlantedFault>(step, layer, ulps > 0 ? Fault::kUlp : Fault::kNone, once);
}

std::shared_ptr<BlockOutputHook> infinity_fault(int64_t step, int64_t layer, bool once) {
  return std::make_shared<PlantedFault>(step, layer, Fault::kInfinity, once);
}

namespace {

constexpr const char* kRounding = "titan::test_bfloat16_rounding";

at::Tensor round_through_bfloat16(const std::vector<c10::IValue>& inputs) {
  const at::Tensor& x = inputs.at(0).toTensor();
  if (x.scalar_type() != at::kFloat) return x.clone();
  return x.to(at::kBFloat16).to(at::kFloat);
}

class Bfloat16Rounding : public BlockOutputHook {
 public:
  Bfloat16Rounding(int64_t step, int64_t layer) : step_(step), layer_(layer) {
    register_observed_op(kRounding, round_through_bfloat16);
  }

  void on_block_output(int64_t step, int64_t layer, at::Tensor& output) override {
    if (step != step_ || layer != layer_) return;
    const at::Tensor x = output;
    output = observed_as_one_op(kRounding, {x}, [&] {
      at::DisableRecordFunctionGuard inside;
      return round_through_bfloat16({x});
    });
  }

 private:
  int64_t step_, layer_;
};

}  // namespace

std::shared_ptr<BlockOutputHook> bfloat16_rounding(int64_t step, int64_t layer) {
  return std::make_shared<Bfloat16Rounding>(step, layer);
}

namespace {

constexpr const char* kScaling = "titan::test_scaling";

class Scaling : public BlockOutputHook {
 public:
  Scaling(int64_t step, int64_t layer, double factor)
      : step_(step), layer_(layer), scale_([factor](const std::vector<c10::IValue>& inputs) {
          const at::Tensor& x = inputs.at(0).toTensor();
          if (x.scalar_type() != at::kFloat) return x.clone();
          return x * static_cast<float>(factor);
        }) {
    register_observed_op(kScaling, scale_);
  }

  void on_block_output(int64_t step, int64_t layer, at::Tensor& output) override {
    if (step != step_ || layer != layer_) return;
    const at::Tensor x = output;
    output = observed_as_one_op(kScaling, {x}, [&] {
      at::DisableRecordFunctionGuard inside;
      return scale_({x});
    });
  }

 private:
  int64_t step_, layer_;
  ObservedOpFunction scale_;
};

}  // namespace

std::shared_ptr<BlockOutputHook> scaled_output(int64_t step, int64_t layer, double factor) {
  return std::make_shared<Scaling>(step, layer, factor);
}

}  // namespace titan::test
