#pragma once
/// @file layer_split.hpp
/// @brief The rule that splits a module's layers over its pipeline stages.
///
/// Stage 0 (type `first`) holds the module's pre block, the last stage (type
/// `last`) its post block, the others (`middle`) only layers; with one stage
/// the type is `whole`. Given `time(type, c)`, the time of a stage of that type
/// holding `c` layers (non-decreasing in `c`), and optionally `caps[j]`, the
/// most layers stage `j` may hold (the planner passes the most that fit its
/// memory), the split
/// 1. minimises the largest stage time tau (binary search over the candidate
///    values of each type: O(log^2 L) probes of the stage times, which are
///    tabulated first: `time` is called once per type and layer count), then
/// 2. gives every stage the most layers that keep it within tau and within its
///    cap, and removes the surplus from the earliest stages first (stage 0,
///    then 1, ...), keeping at least one layer each: early stages hold the
///    most in-flight microbatches under 1F1B, so they get the fewest layers.
///
/// Caps that the uncapped split already keeps change nothing: the uncapped
/// split is then returned bit for bit (tau is the same, and so is every stage
/// after the surplus removal). With caps, the split exists iff every cap is at
/// least 1 and the caps sum to at least `layers`.
/// The rule is deterministic and is part of the planner's search space (the
/// exhaustive reference enumerator uses the same function).

#include <algorithm>
#include <array>
#include <cstddef>
#include <span>
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
/// c)` for c in [1, layers]; `caps` empty (no caps) or one cap per stage.
/// Returns an empty vector if no split exists (`pp > layers`, or the caps
/// cannot hold the layers).
template <class TimeFn>
[[nodiscard]] std::vector<int> balanced_split(int layers, int pp, const TimeFn& time,
                                              std::span<const int> caps = {}) {
  std::vector<int> out;
  if (pp < 1 || pp > layers) return out;
  const bool capped = !caps.empty();
  if (capped) {
    if (caps.size() != static_cast<std::size_t>(pp)) return out;
    long long room = 0;
    for (int c : caps) {
      if (c < 1) return out;
      room += std::min(c, layers);
    }
    if (room < layers) return out;
  }
  auto stage_cap = [&](int j) { return capped ? caps[static_cast<std::size_t>(j)] : layers; };
  if (pp == 1) {
    out.push_back(layers);
    return out;
  }
  // Stage times by type (first, middle, last) and layer count 1..layers,
  // tabulated once: the nested binary searches below probe each many times.
  std::array<std::vector<double>, 3> table;
  for (stage_type t : {stage_type::first, stage_type::middle, stage_type::last}) {
    if (t == stage_type::middle && pp == 2) continue;
    auto& row = table[static_cast<std::size_t>(t)];
    row.resize(static_cast<std::size_t>(layers) + 1);
    for (int c = 1; c <= layers; ++c) row[static_cast<std::size_t>(c)] = time(t, c);
  }
  auto stage_time = [&](stage_type t, int c) {
    return table[static_cast<std::size_t>(t)][static_cast<std::size_t>(c)];
  };
  // Most layers a stage of type `t` can hold within tau (0 if none).
  auto cap = [&](stage_type t, double tau) {
    int lo = 0, hi = layers;  // invariant: stage_time(t, lo) <= tau (lo = 0 means none)
    while (lo < hi) {
      const int mid = lo + (hi - lo + 1) / 2;
      if (stage_time(t, mid) <= tau)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };
  auto feasible = [&](double tau) {
    const long long f = cap(stage_type::first, tau), l = cap(stage_type::last, tau);
    const long long mid = pp > 2 ? cap(stage_type::middle, tau) : 1;
    if (!capped) {
      if (f < 1 || l < 1 || mid < 1) return false;
      return f + l + static_cast<long long>(pp - 2) * mid >= layers;
    }
    long long total = 0;
    for (int j = 0; j < pp; ++j) {
      const stage_type t = type_of_stage(j, pp);
      const long long c = std::min<long long>(t == stage_type::first  ? f
                                              : t == stage_type::last ? l
                                                                      : mid,
                                              stage_cap(j));
      if (c < 1) return false;
      total += c;
    }
    return total >= layers;
  };
  // Smallest feasible tau among time(t, c), c in [1, layers], for each type.
  double best = 0;
  bool found = false;
  for (stage_type t : {stage_type::first, stage_type::middle, stage_type::last}) {
    if (t == stage_type::middle && pp == 2) continue;
    if (!feasible(stage_time(t, layers))) continue;
    int lo = 1, hi = layers;
    while (lo < hi) {
      const int mid = lo + (hi - lo) / 2;
      if (feasible(stage_time(t, mid)))
        hi = mid;
      else
        lo = mid + 1;
    }
    const double tau = stage_time(t, lo);
    if (!found || tau < best) best = tau;
    found = true;
  }
  if (!found) return out;  // cannot happen for non-decreasing times
  out.assign(static_cast<std::size_t>(pp), 0);
  long long total = 0;
  for (int j = 0; j < pp; ++j) {
    out[static_cast<std::size_t>(j)] = std::min(cap(type_of_stage(j, pp), best), stage_cap(j));
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
