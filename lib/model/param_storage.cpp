// Contract in param_storage.h.
#include "model/param_storage.h"

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include <stdexcept>

namespace titan {
namespace {

bool spans_storage(const at::Tensor& t) {
  return t.is_contiguous() && t.storage_offset() == 0 &&
         t.storage().nbytes() == static_cast<size_t>(t.numel()) * t.element_size();
}

void require_whole_storage(const at::Tensor& t, const char* function) {
  if (!spans_storage(t)) {
    throw std::invalid_argument(std::string(function) +
                                ": needs a contiguous tensor that spans its storage");
  }
}

void require_released_for(const at::Tensor& t, const at::Tensor& values) {
  if (!storage_released(t) || values.sizes() != t.sizes() ||
      values.scalar_type() != t.scalar_type() || values.device() != t.device()) {
    throw std::invalid_argument(
        "refill_storage: needs a released tensor and values of its shape, dtype and device");
  }
}

// `memory` (t's bytes) under t's storage.
void install(const at::Tensor& t, at::DataPtr memory) {
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(std::move(memory));
  storage->set_nbytes(static_cast<size_t>(t.numel()) * t.element_size());
}

}  // namespace

at::Tensor shape_only(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor t = at::empty({0}, options);
  // Sizes without a bounds check against the storage, which stays empty.
  t.unsafeGetTensorImpl()->set_sizes_contiguous(sizes);
  return t;
}

void release_storage(const at::Tensor& t) {
  require_whole_storage(t, "release_storage");
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

bool storage_released(const at::Tensor& t) { return t.numel() > 0 && t.storage().nbytes() == 0; }

void refill_storage(const at::Tensor& t, const at::Tensor& values) {
  require_released_for(t, values);
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  at::DataPtr memory = c10::GetAllocator(t.device().type())->allocate(bytes);
  // Written through a tensor of its own, so that `t`'s version counter stays where it was.
  at::from_blob(memory.get(), values.sizes(), values.options()).copy_(values);
  install(t, std::move(memory));
}

void refill_storage_moving(const at::Tensor& t, at::Tensor&& values) {
  require_released_for(t, values);
  if (!spans_storage(values) || values.storage().use_count() != 1) {
    refill_storage(t, values);
    return;
  }
  c10::StorageImpl* from = values.storage().unsafeGetStorageImpl();
  at::DataPtr memory = from->set_data_ptr(at::DataPtr(nullptr, values.device()));
  from->set_nbytes(0);
  values = at::Tensor();
  install(t, std::move(memory));
}

}  // namespace titan
