#pragma once
/// @file layer_split.hpp
/// @brief The rule that splits a module's layers over its pipeline stages.
///
/// Stage 0 (type `first`) holds the module's pre block, the last stage (type
/// `last`) its post block, the others (`middle`) only layers; with one stage
/// the type is `whole`. Given `time(type, c)`, the time of a stage of that type
/// holding `c` layers (non-decreasing in `c`), the split
/// 1. minimises the largest stage time tau (binary search over the candidate
///    values of each type: O(log^2 L) evaluations of cheap table lookups), then
/// 2. gives every stage the most layers that keep it within tau and removes the
///    surplus from the earliest stages first (stage 0, then 1, ...), keeping
///    at least one layer each: early stages hold the most in-flight
///    microbatches under 1F1B, so they get the fewest layers.
/// The rule is deterministic and is part of the planner's search space (the
/// exhaustive reference enumerator uses the same function).

#include <algorithm>
#include <cstddef>
#include <vector>

namespace disttrain::detail {

/// @brief Kind of stage for the cost tables.
enum class stage_type { first = 0, middle = 1, last = 2, whole = 3 };

/// @brief Type of stage `j` of `pp`.
[[nodiscard]] constexpr stage_type type_of_stage(int j, int pp) noexcept {
  if (pp == 1) return stage_type::whole;
  if (j == 0) return stage_type::first;
  if (j == pp - 1) return stage_type::last;
  return stage_type::middle;
}

/// @brief Splits `layers` over `pp` stages (see the file comment); `time(type,
/// c)` for c in [1, layers]. Returns an empty vector if `pp > layers`.
template <class TimeFn>
[[nodiscard]] std::vector<int> balanced_split(int layers, int pp, const TimeFn& time) {
  std::vector<int> out;
  if (pp < 1 || pp > layers) return out;
  if (pp == 1) {
    out.push_back(layers);
    return out;
  }
  // Most layers a stage of type `t` can hold within tau (0 if none).
  auto cap = [&](stage_type t, double tau) {
    int lo = 0, hi = layers;  // invariant: time(t, lo) <= tau (lo = 0 means none)
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (time(t, mid) <= tau)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };
  auto feasible = [&](double tau) {
    const long long f = cap(stage_type::first, tau), l = cap(stage_type::last, tau);
    const long long mid = pp > 2 ? cap(stage_type::middle, tau) : 1;
    if (f < 1 || l < 1 || mid < 1) return false;
    return f + l + static_cast<long long>(pp - 2) * mid >= layers;
  };
  // Smallest feasible tau among time(t, c), c in [1, layers], for each type.
  double best = 0;
  bool found = false;
  for (stage_type t : {stage_type::first, stage_type::middle, stage_type::last}) {
    if (t == stage_type::middle && pp == 2) continue;
    if (!feasible(time(t, layers))) continue;
    int lo = 1, hi = layers;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (feasible(time(t, mid)))
        hi = mid;
      else
        lo = mid + 1;
    }
    const double tau = time(t, lo);
    if (!found || tau < best) best = tau;
    found = true;
  }
  if (!found) return out;  // cannot happen for non-decreasing times
  out.assign(static_cast<std::size_t>(pp), 0);
  long long total = 0;
  for (int j = 0; j < pp; ++j) {
    out[static_cast<std::size_t>(j)] = cap(type_of_stage(j, pp), best);
    total += out[static_cast<std::size_t>(j)];
  }
  long long surplus = total - layers;
  for (int j = 0; j < pp && surplus > 0; ++j) {
    auto& c = out[static_cast<std::size_t>(j)];
    const long long take = std::min<long long>(surplus, c - 1);
    c -= static_cast<int>(take);
    surplus -= take;
  }
  return out;
}

}  // namespace disttrain::detail
