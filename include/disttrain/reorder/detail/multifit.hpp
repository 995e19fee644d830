#pragma once
/// @file multifit.hpp
/// @brief Internal: MULTIFIT (Coffman, Garey and Johnson 1978), a step of the
/// `refined` balance method of `partitioner`: a bisection on a bin capacity C,
/// each step a first-fit-decreasing packing of the items into the k bins of
/// capacity C. It finds what moves and swaps between two bins cannot: cells
/// where one large item must sit with the smallest ones, and many mid-sized
/// items must be spread around it (e.g. one 9.8 among 10.2-per-bin items).

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/reorder/detail/partition_workspace.hpp"

namespace disttrain::detail {

/// @brief MULTIFIT over a max-tree of the bins' free room; owns the tree and
/// the assignment of the packing under test.
class multifit_partition {
 public:
  /// @brief Grows the buffers for n items and k bins.
  void reserve(std::size_t n, std::uint32_t bins) {
    const std::size_t leaves = std::bit_ceil(std::size_t{bins});
    if (room_.capacity() < 2 * leaves) room_.reserve(2 * leaves);
    if (trial_.capacity() < n) trial_.reserve(n);
  }

  /// @brief Packs the items of `ws` (ranked in ws.order; no equal-count mode)
  /// into bins of a capacity below the max load U of `bin_of`, at most
  /// `steps` packings: the first at U - (U - lower) / 4 (`lower`: a lower
  /// bound of the max load); when that does not fit, FFD is taken to
  /// be no help here and the search stops (one packing spent); else the
  /// capacity is bisected between `lower` and the best max load found. Each
  /// packing that fits and lowers the max load replaces `bin_of`. Returns the
  /// max load of `bin_of` (<= U). Deterministic: a function of the costs
  /// and their ranking.
  double run(partition_workspace& ws, std::span<std::uint32_t> bin_of, double lower,
             std::uint32_t steps) {
    const std::size_t n = ws.costs.size();
    trial_.resize(n);
    double lo = lower, best = ws.max_load(bin_of);
    for (std::uint32_t s = 0; s < steps && best - lo > lo * 1e-9; ++s) {
      const double capacity = s == 0 ? best - (best - lo) / 4 : lo + (best - lo) / 2;
      if (!pack(ws, capacity)) {
        if (s == 0) break;
        lo = capacity;
        continue;
      }
      const double got = ws.max_load(trial_);
      if (got < best) {
        best = got;
        std::copy(trial_.begin(), trial_.end(), bin_of.begin());
      } else {
        lo = capacity;  // rounding: a fitting packing no better; look higher
      }
    }
    return best;
  }

 private:
  // First fit decreasing at `capacity` into trial_: each item (largest
  // first) to the lowest-index bin with room. The room of the bins sits in a
  // max-tree (node i: the larger room of nodes 2i and 2i+1), so the first
  // bin with room for c is found by descending to the leftmost leaf whose
  // room is >= c: O(log k) per item. False when an item fits nowhere.
  bool pack(partition_workspace& ws, double capacity) {
    const std::size_t leaves = std::bit_ceil(static_cast<std::size_t>(ws.k));
    room_.assign(2 * leaves, -1.0);  // padding leaves: no room
    std::fill(room_.begin() + static_cast<std::ptrdiff_t>(leaves),
              room_.begin() + static_cast<std::ptrdiff_t>(leaves + ws.k), capacity);
    for (std::size_t i = leaves; i-- > 1;) room_[i] = std::max(room_[2 * i], room_[2 * i + 1]);
    for (const std::uint32_t item : ws.order) {
      const double c = ws.costs[item];
      if (room_[1] < c) return false;
      std::size_t i = 1;
      while (i < leaves) i = room_[2 * i] >= c ? 2 * i : 2 * i + 1;
      trial_[item] = static_cast<std::uint32_t>(i - leaves);
      room_[i] -= c;
      // Up to the first ancestor whose larger room did not change.
      for (i /= 2; i >= 1; i /= 2) {
        const double r = std::max(room_[2 * i], room_[2 * i + 1]);
        if (r == room_[i]) break;
        room_[i] = r;
      }
    }
    return true;
  }

  std::vector<double> room_;          // max-tree of the bins' free room
  std::vector<std::uint32_t> trial_;  // the packing under test
};

}  // namespace disttrain::detail
