// A sum of tensor lists in one fixed order: the pairwise tree over leaf indices that pairs
// leaves (0,1), (2,3), ... then those pairs, and so on, an odd node at the end of a level waiting
// for the next level. Leaves are pushed in index order; nodes are added as soon as both halves
// are in (a binary counter), so at most log2(leaves) + 1 lists are held at once.
//
// Float addition is commutative but not associative: the tree's shape alone fixes the bits. A
// block of 2^k leaves starting at a multiple of 2^k is one node of the tree, so who sums it (a
// rank, a thread) does not change the result: push that node with its leaf count instead.
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

namespace titan {

class PairwiseSum {
 public:
  // Requires: `parts` has the same shapes and dtypes for every push; `leaves` >= 1 is how many
  // leaves the list already sums (a power of two, starting at a multiple of itself). Takes the
  // tensors over: they are added to in place.
  void push(std::vector<at::Tensor> parts, int64_t leaves = 1);

  // The sum of everything pushed, in the tree's order. Requires at least one push; empties this.
  std::vector<at::Tensor> collapse();

 private:
  struct Node {
    int64_t leaves;
    std::vector<at::Tensor> parts;
  };
  void merge_top();  // the top two nodes become one: left (lower indices) + right
  std::vector<Node> stack_;
};

}  // namespace titan
