// Parameters that hold no memory. FSDP's memory trick: a unit's full parameters hold memory only
// while the unit computes. After its forward the storage under a parameter is emptied in place,
// so that autograd's saved references to it (they share its StorageImpl) hold no memory either;
// before its backward the storage gets fresh memory and the gathered values back. Under FSDP the
// model is built so from the start (shape_only): no rank ever holds the whole model.
#pragma once

#include <ATen/ATen.h>

namespace titan {

// A contiguous tensor of `sizes` and `options` whose storage holds no memory: storage_released
// is true for it (for a non-empty shape) and refill_storage gives it memory. Nothing may read it
// before then.
at::Tensor shape_only(at::IntArrayRef sizes, const at::TensorOptions& options);

// Empties `t`'s storage in place: its memory goes back to the allocator, and every tensor sharing
// the storage now has none. Requires: `t` is contiguous from the storage's start and spans it (a
// parameter, not a view of one), and nothing reads it until refill_storage.
void release_storage(const at::Tensor& t);

// Whether `t`'s storage was emptied by release_storage (and not refilled since).
bool storage_released(const at::Tensor& t);

// Gives `t`'s storage fresh memory from its device's allocator, holding `values` (t's shape,
// dtype and device). `t`'s version counter does not move: autograd checks saved tensors against
// it, and a refill restores what was saved rather than changing it.
void refill_storage(const at::Tensor& t, const at::Tensor& values);

// refill_storage without the copy where it can: when `values` alone owns a storage it spans (a
// fresh tensor, as an all-gather's unpacking gives), its memory moves to `t` and `values` is
// left with none; otherwise it is refill_storage.
void refill_storage_moving(const at::Tensor& t, at::Tensor&& values);

}  // namespace titan
