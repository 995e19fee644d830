#pragma once
/// @file lpt.hpp
/// @brief Internal: longest processing time first (LPT), the `lpt` balance
/// method of `partitioner`: items by descending cost, each to the currently
/// lightest bin (max load < 4/3 of optimal), optionally with equal counts.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "disttrain/reorder/detail/partition_workspace.hpp"
#include "disttrain/reorder/detail/radix_sort.hpp"

namespace disttrain::detail {

/// @brief LPT over a winner tree of the bins; owns the tree.
class lpt_partition {
 public:
  /// @brief Grows the tree for k bins.
  void reserve(std::size_t bins) {
    const std::size_t leaves = std::bit_ceil(bins);
    if (tree_key_.capacity() < 2 * leaves) tree_key_.reserve(2 * leaves);
    if (tree_bin_.capacity() < 2 * leaves) tree_bin_.reserve(2 * leaves);
  }

  /// @brief Assigns every item of `ws` (ranked in ws.order) to a bin.
  void run(partition_workspace& ws, std::span<std::uint32_t> bin_of) {
    const std::uint32_t n = static_cast<std::uint32_t>(ws.costs.size());
    const std::uint32_t q = n / ws.k, rem = n % ws.k;
    ws.count.assign(ws.k, 0);
    ws.load.assign(ws.k, 0.0);
    tree_size_ = std::bit_ceil(static_cast<std::size_t>(ws.k));
    tree_key_.assign(2 * tree_size_, closed);
    tree_bin_.resize(2 * tree_size_);
    for (std::size_t leaf = 0; leaf < tree_size_; ++leaf) {
      tree_bin_[tree_size_ + leaf] = static_cast<std::uint32_t>(leaf);
      if (leaf < ws.k) tree_key_[tree_size_ + leaf] = ascending_key(0.0);
    }
    for (std::size_t i = tree_size_; i-- > 1;) {  // equal keys: the left (lower) bin wins
      const std::size_t w = tree_key_[2 * i + 1] < tree_key_[2 * i] ? 2 * i + 1 : 2 * i;
      tree_key_[i] = tree_key_[w];
      tree_bin_[i] = tree_bin_[w];
    }
    std::uint32_t big = 0;  // bins already holding q + 1 items (equal-count mode)
    for (std::uint32_t item : ws.order) {
      // Close bins that became full (equal-count mode) as they reach the root.
      while (ws.equal && ws.count[tree_bin_[1]] >= (big < rem ? q + 1 : q))
        tree_set(tree_bin_[1], closed);
      const std::uint32_t b = tree_bin_[1];
      bin_of[item] = b;
      ws.load[b] += ws.costs[item];
      if (++ws.count[b] == q + 1 && ws.equal) ++big;
      tree_set(b, ascending_key(ws.load[b]));
    }
  }

 private:
  // LPT keeps the bins in a winner tree (a tournament over the bins: node i
  // holds the best of nodes 2i and 2i+1), ordered by (key, bin) where key is
  // the bin's load as an ordered integer, or `closed` for a full bin
  // (equal-count mode) and the padding leaves. The root is the lightest open
  // bin, ties to the lower index: the bin a binary heap on (load, bin) would
  // give, at log2(k) branch-free comparisons per item.
  static constexpr std::uint64_t closed = std::numeric_limits<std::uint64_t>::max();

  void tree_set(std::size_t leaf, std::uint64_t key) noexcept {
    std::size_t i = tree_size_ + leaf;
    tree_key_[i] = key;
    for (i /= 2; i >= 1; i /= 2) {
      const std::size_t l = 2 * i, r = l + 1;
      const bool right = tree_key_[r] < tree_key_[l] ||
                         (tree_key_[r] == tree_key_[l] && tree_bin_[r] < tree_bin_[l]);
      const std::size_t w = right ? r : l;
      tree_key_[i] = tree_key_[w];
      tree_bin_[i] = tree_bin_[w];
    }
  }

  std::vector<std::uint64_t> tree_key_;  // winner tree keys
  std::vector<std::uint32_t> tree_bin_;  // winner tree bins
  std::size_t tree_size_ = 1;            // leaves of the winner tree
};

}  // namespace disttrain::detail
