// What a step's observers measured during one execution, kept by type: the step carries its
// observers' findings (per-layer norms, the numerics trace's record, a validation pass) without
// knowing what they are, so that lib/step depends on none of the instruments' formats.
//
// Each finding type is defined by the instrument that adds it and read by whoever knows that
// type; an execution holds at most one finding of each type.
#pragma once

#include <memory>
#include <optional>
#include <type_traits>
#include <typeindex>
#include <utility>
#include <vector>

namespace titan {

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};

class StepFindings {
 public:
  // Keeps `value` as this execution's finding of type T, replacing an earlier one.
  template <class T>
  void put(T value) {
    // A finding that may be absent is not put: find<T>() would miss an optional<T>.
    static_assert(!IsOptional<T>::value, "put the value, or nothing");
    auto held = std::make_shared<const T>(std::move(value));
    for (auto& item : items_) {
      if (item.first == std::type_index(typeid(T))) {
        item.second = std::move(held);
        return;
      }
    }
    items_.emplace_back(std::type_index(typeid(T)), std::move(held));
  }

  // The finding of type T; null when no observer added one.
  template <class T>
  const T* find() const {
    for (const auto& item : items_) {
      if (item.first == std::type_index(typeid(T))) return static_cast<const T*>(item.second.get());
    }
    return nullptr;
  }

 private:
  // Copies of an outcome share the (immutable) findings.
  std::vector<std::pair<std::type_index, std::shared_ptr<const void>>> items_;
};

}  // namespace titan
