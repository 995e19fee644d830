#pragma once
/// @file lpt.hpp
/// @brief Internal: longest processing time first (LPT), the `lpt` balance
/// method of `partitioner`: items by descending cost, each to the currently
/// lightest bin (max load < 4/3 of optimal), optionally with equal counts.

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/reorder/detail/partition_workspace.hpp"
#include "disttrain/reorder/detail/radix_sort.hpp"

namespace disttrain::detail {

/// @brief LPT over a loser tree of the bins; owns the tree.
class lpt_partition {
 public:
  /// @brief Grows the tree for k bins.
  void reserve(std::size_t bins) {
    const std::size_t leaves = std::bit_ceil(bins);
    if (loser_.capacity() < leaves) loser_.reserve(leaves);
    if (win_.capacity() < 2 * leaves) win_.reserve(2 * leaves);
  }

  /// @brief Assigns every item of `ws` (ranked in ws.order) to a bin.
  void run(partition_workspace& ws, std::span<std::uint32_t> bin_of) {
    const std::uint32_t n = static_cast<std::uint32_t>(ws.costs.size());
    const std::uint32_t q = n / ws.k, rem = n % ws.k;
    ws.count.assign(ws.k, 0);
    ws.load.assign(ws.k, 0.0);
    // The first round needs no tree: while the costs are positive, item r of
    // the first k goes to bin r (bins 0 .. r-1 hold positive loads, the empty
    // ones tie and the lowest index wins). Equal-count mode takes the tree
    // from the start (it closes full bins there).
    std::uint32_t first = 0;
    if (!ws.equal)
      for (; first < std::min(n, ws.k) && ws.costs[ws.order[first]] > 0.0; ++first) {
        const std::uint32_t item = ws.order[first];
        bin_of[item] = first;
        ws.load[first] = ws.costs[item];
        ws.count[first] = 1;
      }
    build(ws);
    std::uint32_t big = 0;  // bins already holding q + 1 items (equal-count mode)
    for (std::uint32_t item : std::span(ws.order).subspan(first)) {
      // Close bins that became full (equal-count mode) as they reach the root.
      while (ws.equal && ws.count[top_.bin] >= (big < rem ? q + 1 : q))
        replace_top(entry{closed, top_.bin});
      const std::uint32_t b = top_.bin;
      bin_of[item] = b;
      ws.load[b] += ws.costs[item];
      if (++ws.count[b] == q + 1 && ws.equal) ++big;
      replace_top(entry{ascending_key(ws.load[b]), b});
    }
  }

 private:
  // LPT keeps the bins in a loser tree (a tournament over the bins: node i
  // holds the loser of the match between the winners of its two subtrees,
  // top_ the overall winner), ordered by (key, bin) where key is the bin's
  // load as an ordered integer, or `closed` for a full bin (equal-count mode)
  // and the padding leaves. The winner is the lightest open bin, ties to the
  // lower index: the bin a binary heap on (load, bin) would give. Only the
  // winner's load changes, and replaying its path costs one comparison per
  // level against the stored losers.
  static constexpr std::uint64_t closed = std::numeric_limits<std::uint64_t>::max();
  struct entry {
    std::uint64_t key;
    std::uint32_t bin;
  };
  [[nodiscard]] static bool beats(const entry& x, const entry& y) noexcept {
    return x.key < y.key || (x.key == y.key && x.bin < y.bin);
  }

  // The tree over ws.load (every bin open), bottom-up: O(k).
  void build(const partition_workspace& ws) {
    leaves_ = std::bit_ceil(static_cast<std::size_t>(ws.k));
    loser_.resize(leaves_);
    win_.resize(2 * leaves_);  // winners of the subtrees, for the build only
    for (std::size_t leaf = 0; leaf < leaves_; ++leaf)
      win_[leaves_ + leaf] = entry{leaf < ws.k ? ascending_key(ws.load[leaf]) : closed,
                                   static_cast<std::uint32_t>(leaf)};
    for (std::size_t i = leaves_; i-- > 1;) {
      const entry& l = win_[2 * i];
      const entry& r = win_[2 * i + 1];
      const bool right = beats(r, l);
      win_[i] = right ? r : l;
      loser_[i] = right ? l : r;
    }
    top_ = win_[1];
  }

  // The winner's key becomes `e.key` (e.bin is the winner's bin): replays
  // its path from its leaf to the root.
  void replace_top(entry e) noexcept {
    for (std::size_t i = (leaves_ + e.bin) / 2; i >= 1; i /= 2)
      if (beats(loser_[i], e)) std::swap(loser_[i], e);
    top_ = e;
  }

  std::vector<entry> loser_;  // loser_[i]: the loser at node i (1 .. leaves - 1)
  std::vector<entry> win_;    // build() scratch: subtree winners
  entry top_{closed, 0};      // the lightest open bin
  std::size_t leaves_ = 1;    // leaves of the tree (a power of two)
};

}  // namespace disttrain::detail
