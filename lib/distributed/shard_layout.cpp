// Contract in shard_layout.h.
#include "distributed/shard_layout.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace titan {

RowRange fsdp_rows(int64_t rows, int64_t rank, int64_t ranks) {
  const int64_t per_rank = (rows + ranks - 1) / ranks;
  const int64_t begin = std::min(rank * per_rank, rows);
  return {begin, std::min(begin + per_rank, rows)};
}

int64_t ParamShard::real_rows(int64_t rank) const {
  return std::clamp<int64_t>(rows - rank * shard_rows, 0, shard_rows);
}

UnitLayout::UnitLayout(const std::vector<at::Tensor>& params, int64_t ranks) : ranks_(ranks) {
  if (ranks < 1) throw std::invalid_argument(fmt::format("UnitLayout: {} ranks", ranks));
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (p.dim() < 1 || p.scalar_type() != params[0].scalar_type() ||
        p.device() != params[0].device()) {
      throw std::invalid_argument(fmt::format(
          "UnitLayout: parameter {} has {} dimensions, {} on {}; every parameter needs one "
          "dimension or more and the first parameter's dtype and device",
          i, p.dim(), c10::toString(p.scalar_type()), p.device().str()));
    }
    ParamShard s;
    s.sizes.assign(p.sizes().begin(), p.sizes().end());
    s.rows = p.size(0);
    s.row_numel = 1;
    for (size_t d = 1; d < s.sizes.size(); ++d) s.row_numel *= s.sizes[d];
    s.shard_rows = (s.rows + ranks - 1) / ranks;
    s.offset = segment_numel_;
    segment_numel_ += s.shard_rows * s.row_numel;
    params_.push_back(std::move(s));
  }
}

at::Tensor UnitLayout::shard_view(const at::Tensor& segment, size_t i) const {
  const ParamShard& s = params_.at(i);
  std::vector<int64_t> sizes = s.sizes;
  sizes[0] = s.shard_rows;
  return segment.narrow(0, s.offset, s.shard_rows * s.row_numel).view(sizes);
}

void UnitLayout::fill_segment(const std::vector<at::Tensor>& full, int64_t rank,
                              const at::Tensor& segment) const {
  if (full.size() != params_.size())
    throw std::invalid_argument("UnitLayout: not the layout's parameters");
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamShard& s = params_[i];
    const int64_t real = s.real_rows(rank);
    if (real > 0) {
      shard_view(segment, i).narrow(0, 0, real).copy_(full[i].narrow(0, rank * s.shard_rows, real));
    }
  }
}

at::Tensor UnitLayout::segment_of(const std::vector<at::Tensor>& full, int64_t rank) const {
  at::Tensor segment =
      at::zeros({segment_numel_}, full.empty() ? at::TensorOptions() : full[0].options());  // (S,)
  fill_segment(full, rank, segment);
  return segment;
}

at::Tensor UnitLayout::pack_for_reduce_scatter(const std::vector<at::Tensor>& full) const {
  // One buffer, each rank's segment written in place (no per-rank copies to concatenate).
  at::Tensor packed =
      at::zeros({ranks_ * segment_numel_}, full.empty() ? at::TensorOptions() : full[0].options());
  for (int64_t r = 0; r < ranks_; ++r) {
    fill_segment(full, r, packed.narrow(0, r * segment_numel_, segment_numel_));
  }
  return packed;  // (ranks * S,)
}

std::vector<at::Tensor> UnitLayout::unpack_gathered(const at::Tensor& gathered) const {
  if (gathered.dim() != 1 || gathered.numel() != ranks_ * segment_numel_)
    throw std::invalid_argument("UnitLayout::unpack_gathered: not ranks x segment_numel elements");
  std::vector<at::Tensor> full;
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamShard& s = params_[i];
    std::vector<at::Tensor> pieces;
    for (int64_t r = 0; r < ranks_; ++r) {
      const int64_t real = s.real_rows(r);
      if (real > 0) {
        pieces.push_back(shard_view(gathered.narrow(0, r * segment_numel_, segment_numel_), i)
                             .narrow(0, 0, real));
      }
    }
    full.push_back(pieces.empty() ? at::empty(s.sizes, gathered.options()) : at::cat(pieces));
  }
  return full;
}

}  // namespace titan
