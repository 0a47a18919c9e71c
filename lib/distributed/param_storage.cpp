// Contract in param_storage.h.
#include "distributed/param_storage.h"

#include <c10/core/Allocator.h>
#include <c10/core/StorageImpl.h>

#include <stdexcept>

namespace titan {
namespace {

void require_whole_storage(const at::Tensor& t, const char* function) {
  if (!t.is_contiguous() || t.storage_offset() != 0 ||
      t.storage().nbytes() != static_cast<size_t>(t.numel()) * t.element_size()) {
    throw std::invalid_argument(std::string(function) +
                                ": needs a contiguous tensor that spans its storage");
  }
}

}  // namespace

void release_storage(const at::Tensor& t) {
  require_whole_storage(t, "release_storage");
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  storage->set_nbytes(0);
}

bool storage_released(const at::Tensor& t) { return t.numel() > 0 && t.storage().nbytes() == 0; }

void refill_storage(const at::Tensor& t, const at::Tensor& values) {
  if (!storage_released(t) || values.sizes() != t.sizes() ||
      values.scalar_type() != t.scalar_type() || values.device() != t.device()) {
    throw std::invalid_argument(
        "refill_storage: needs a released tensor and values of its shape, dtype and device");
  }
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  at::DataPtr memory = c10::GetAllocator(t.device().type())->allocate(bytes);
  // Written through a tensor of its own, so that `t`'s version counter stays where it was.
  at::from_blob(memory.get(), values.sizes(), values.options()).copy_(values);
  c10::StorageImpl* storage = t.storage().unsafeGetStorageImpl();
  storage->set_data_ptr_noswap(std::move(memory));
  storage->set_nbytes(bytes);
}

}  // namespace titan
