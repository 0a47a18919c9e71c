// How FSDP splits a unit's parameters (a transformer block, the embedding, the final norm and
// output) over a shard group, as torchtitan's FSDP2 does: each parameter along dim 0, every rank
// holding ceil(rows / ranks) rows, the last ranks' rows padded with zeros where the rows do not
// divide (a rank may hold padding only). One rank's shards of all the unit's parameters lie one
// after another in a flat "segment", so that a unit moves in one collective:
//
//   all-gather:     segments of every rank, rank-major (ranks * segment_numel,) -> unpack_gathered
//   reduce-scatter: pack_for_reduce_scatter (rank-major, as above) -> each rank's segment
//
// Pure tensor bookkeeping, on any device; the collectives are ProcessGroup's.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace titan {

// Rank `rank`'s real rows [begin, end) of a parameter of `rows` rows split over `ranks`:
// ceil(rows / ranks) rows a rank, the last ranks' cut short or empty (begin == end == rows).
struct RowRange {
  int64_t begin = 0, end = 0;
};
RowRange fsdp_rows(int64_t rows, int64_t rank, int64_t ranks);

// One parameter's place in the unit's segments.
struct ParamShard {
  std::vector<int64_t> sizes;  // the full parameter's
  int64_t rows = 0;            // sizes[0]
  int64_t row_numel = 0;       // elements a row (the product of the other dims)
  int64_t shard_rows = 0;      // every rank's rows, padding included: ceil(rows / ranks)
  int64_t offset = 0;          // where its shard starts in a segment, in elements

  // Rank r's rows of the parameter that are real (not padding): rows [r * shard_rows, that end).
  int64_t real_rows(int64_t rank) const;
};

class UnitLayout {
 public:
  // Requires: every parameter has at least one dimension, all one dtype and device; ranks >= 1.
  // Throws std::invalid_argument otherwise.
  UnitLayout(const std::vector<at::Tensor>& params, int64_t ranks);

  int64_t ranks() const { return ranks_; }
  // One rank's elements of the unit, padding included.
  int64_t segment_numel() const { return segment_numel_; }
  const std::vector<ParamShard>& params() const { return params_; }

  // Rank `rank`'s segment of `full` (tensors shaped as the layout's parameters): (segment_numel,),
  // padding rows zero.
  at::Tensor segment_of(const std::vector<at::Tensor>& full, int64_t rank) const;
  // Every rank's segment of `full`, rank-major: (ranks * segment_numel,), what a reduce-scatter
  // of the unit's gradients takes; segment r is segment_of(full, r).
  at::Tensor pack_for_reduce_scatter(const std::vector<at::Tensor>& full) const;
  // The full parameters (new tensors, padding dropped) from an all-gathered
  // (ranks * segment_numel,) buffer of every rank's segment, rank-major.
  std::vector<at::Tensor> unpack_gathered(const at::Tensor& gathered) const;
  // Parameter i's shard inside one rank's `segment`: a (shard_rows, ...) view.
  at::Tensor shard_view(const at::Tensor& segment, size_t i) const;

 private:
  // Writes rank `rank`'s rows of `full` into `segment` (zeros: padding stays zero).
  void fill_segment(const std::vector<at::Tensor>& full, int64_t rank,
                    const at::Tensor& segment) const;

  int64_t ranks_ = 1;
  int64_t segment_numel_ = 0;
  std::vector<ParamShard> params_;
};

}  // namespace titan
