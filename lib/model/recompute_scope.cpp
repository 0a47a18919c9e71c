#include "model/recompute_scope.h"

namespace titan {
namespace {
thread_local int recompute_depth = 0;
}  // namespace

bool recomputing() { return recompute_depth > 0; }

RecomputeScope::RecomputeScope() { ++recompute_depth; }

RecomputeScope::~RecomputeScope() { --recompute_depth; }

}  // namespace titan
