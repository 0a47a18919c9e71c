// FSDP's release and refill of a parameter's storage around autograd (model/param_storage.h).
#include <stdexcept>

#include "catch_torch.h"
#include "model/param_storage.h"

namespace titan {

TEST_CASE(
    "param storage: a parameter released after its forward and refilled before its backward "
    "gives the gradients of one never released, bit for bit",
    "[distributed]") {
  at::manual_seed(5);
  const at::Tensor values = at::randn({16, 8}), x_values = at::randn({4, 16});
  // Reference: nothing released.
  at::Tensor w_ref = values.clone().requires_grad_(), x_ref = x_values.clone().requires_grad_();
  at::tanh(at::mm(x_ref, w_ref)).sum().backward();

  at::Tensor w = values.clone().requires_grad_(), x = x_values.clone().requires_grad_();
  at::Tensor y = at::tanh(at::mm(x, w));  // mm saves w (for x's gradient) and x (for w's)
  release_storage(w);
  CHECK(storage_released(w));
  CHECK(w.storage().nbytes() == 0);
  CHECK(w.storage().data() == nullptr);
  int refills = 0;
  y.register_hook([&](const at::Tensor& grad) {
    ++refills;
    refill_storage(w, values);
    return grad;
  });
  const auto version = w._version();
  y.sum().backward();
  CHECK(refills == 1);
  CHECK(w._version() == version);
  CHECK_FALSE(storage_released(w));
  CHECK(at::equal(w, values));
  CHECK(at::equal(w.grad(), w_ref.grad()));
  CHECK(at::equal(x.grad(), x_ref.grad()));
}

TEST_CASE("param storage: views, wrong values and a second refill are refused", "[distributed]") {
  at::Tensor w = at::randn({4, 4});
  CHECK_THROWS_AS(release_storage(w.narrow(0, 1, 2)), std::invalid_argument);
  CHECK_THROWS_AS(refill_storage(w, at::zeros({4, 4})), std::invalid_argument);  // not released
  release_storage(w);
  CHECK_THROWS_AS(refill_storage(w, at::zeros({2, 4})), std::invalid_argument);
  CHECK_THROWS_AS(refill_storage(w, at::zeros({4, 4}, at::kDouble)), std::invalid_argument);
  refill_storage(w, at::ones({4, 4}));
  CHECK(at::equal(w, at::ones({4, 4})));
}

TEST_CASE(
    "param storage: a moving refill takes a fresh tensor's memory without a copy, and copies "
    "values that share their storage",
    "[distributed]") {
  at::Tensor w = at::randn({4, 4}).requires_grad_();
  const auto version = w._version();
  release_storage(w);
  at::Tensor fresh = at::cat({at::randn({2, 4}), at::randn({2, 4})});  // as unpacking makes it
  const at::Tensor expected = fresh.clone();
  const void* memory = fresh.data_ptr();
  refill_storage_moving(w, std::move(fresh));
  CHECK(w.data_ptr() == memory);  // moved, not copied
  CHECK(at::equal(w, expected));
  CHECK(w._version() == version);

  release_storage(w);
  const at::Tensor shared = at::full({4, 4}, 3.0f);
  at::Tensor view = shared.view({4, 4});  // shares the storage: copied, left as it was
  refill_storage_moving(w, std::move(view));
  CHECK(w.data_ptr() != shared.data_ptr());
  CHECK(at::equal(w, shared));
  CHECK(at::equal(shared, at::full({4, 4}, 3.0f)));
}

}  // namespace titan
