#pragma once
/// @file stage_time_cache.hpp
/// @brief The planner search's caches of stage times and layer splits: their
/// keys (structs with named fields, hashed for `std::unordered_map`), the
/// lazily filled stage-time table of one module configuration, and the split
/// of a module's layers into stages with the stage times.

#include <algorithm>
#include <compare>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <vector>

#include "disttrain/cost/stage.hpp"
#include "disttrain/plan/detail/layer_split.hpp"
#include "disttrain/plan/planner_options.hpp"

namespace disttrain {

namespace detail {

/// @brief `v[i]` with an `int` index.
template <class T>
[[nodiscard]] const T& at(const std::vector<T>& v, int i) {
  return v[static_cast<std::size_t>(i)];
}

/// @brief The recomputation of a searched stage (ordered as the plans' tie
/// key orders them).
enum class recompute_mode : std::uint8_t { none = 0, selective = 1, full = 2 };

/// @brief Key of a stage-time table: module `module` at TP degree `tp`,
/// recompute `rc`, `k` samples per replica and microbatch.
struct time_table_key {
  std::size_t module = 0;
  int tp = 1;
  recompute_mode rc = recompute_mode::none;
  int k = 1;
  friend bool operator==(const time_table_key&, const time_table_key&) = default;
};
/// @brief Hash of a `time_table_key` (the fields packed into one word).
struct time_table_key_hash {
  std::size_t operator()(const time_table_key& x) const noexcept {
    return std::hash<std::uint64_t>{}((static_cast<std::uint64_t>(x.module) << 57) ^
                                      (static_cast<std::uint64_t>(x.tp & 0xff) << 49) ^
                                      (static_cast<std::uint64_t>(x.rc) << 47) ^
                                      static_cast<std::uint64_t>(static_cast<std::uint32_t>(x.k)));
  }
};

/// @brief Stage times of one module configuration by (stage type, layer
/// count), filled on demand (`stage_tables::tt`), with their W parts (`w`).
struct time_table {
  std::size_t module = 0;
  int tp = 1, k = 1, layers = 0;
  recompute_mode rc = recompute_mode::none;
  std::vector<double> v;  // 4 * (layers + 1), NaN = not yet computed
  std::vector<double> w;  // the W (weight-gradient) part of each entry of v
  double rho = std::numeric_limits<double>::quiet_NaN();
  double rho_zb = std::numeric_limits<double>::quiet_NaN();  // the same for time - 2 W
};

/// @brief First layer of a stage of `type` holding `c` layers of a module of
/// `L` layers (-1 if impossible).
[[nodiscard]] inline int first_layer_of(stage_type type, int c, int L) noexcept {
  switch (type) {
    case stage_type::first: return c <= L - 1 ? 0 : -1;
    case stage_type::middle: return c <= L - 2 ? 1 : -1;
    case stage_type::last: return c <= L - 1 ? L - c : -1;
    case stage_type::whole: return c == L ? 0 : -1;
  }
  return -1;
}

/// @brief What a cached split is of: a disaggregated module alone, or the
/// backbone with the colocated side modules of `split_key::colocated` (by the
/// balanced or, for monolithic layouts, the even rule).
enum class split_family : std::uint8_t {
  plain = 1,
  colocated_balanced = 2,
  colocated_even = 3,
};

/// @brief Key of a cached split: the family, the module's configuration
/// (module, tp, recompute, samples per replica `k`), its `pp` stages, `v`
/// interleaved chunks per stage and the colocated side modules (bit i: model
/// module i; 0 for `plain`).
struct split_key {
  split_family family = split_family::plain;
  std::size_t module = 0;
  int tp = 1;
  recompute_mode rc = recompute_mode::none;
  int pp = 1;
  int k = 1;
  int v = 1;
  std::uint32_t colocated = 0;
  friend auto operator<=>(const split_key&, const split_key&) = default;
};
/// @brief Hash of a `split_key` (the fields packed into one word).
struct split_key_hash {
  std::size_t operator()(const split_key& x) const noexcept {
    const std::uint64_t packed = (static_cast<std::uint64_t>(x.family) << 61) ^
                                 (static_cast<std::uint64_t>(x.module) << 57) ^
                                 (static_cast<std::uint64_t>(x.tp & 0xff) << 49) ^
                                 (static_cast<std::uint64_t>(x.rc) << 48) ^
                                 (static_cast<std::uint64_t>(x.pp & 0xffff) << 32) ^
                                 static_cast<std::uint64_t>(static_cast<std::uint32_t>(x.k));
    return std::hash<std::uint64_t>{}(packed ^ (static_cast<std::uint64_t>(x.v) << 58) ^
                                      (static_cast<std::uint64_t>(x.colocated) << 40));
  }
};

/// @brief A split of a module's layers into stages, with its stage times.
struct split_info {
  std::vector<int> layers, first;
  std::vector<double> times;  // stage times as evaluate() sums them
  double tmax = 0, tsum = 0;  // tsum accumulated in stage order (a lower bound of the path)
  /// The stages' W parts (`stage_tables::fill_weights`; splits with one chunk per stage only).
  std::vector<double> weights;
};

/// @brief Split of `L` layers into `pp` stages by `rule`, with stage times
/// `fn(type, c)` (into `s`, empty `layers` when impossible).
/// With `v > 1` (interleaved) every stage gets a multiple of `v` layers: the
/// even rule needs `pp * v | L`, the balanced rule splits `L / v` units of `v` layers.
/// `unit_caps` (balanced rule only; empty: none) caps stage j at `unit_caps[j]`
/// units (layers when `v <= 1`), as `balanced_split`'s caps.
template <class Fn>
void make_split(split_info& s, int v, int L, int pp, layer_split_rule rule, const Fn& fn,
                std::span<const int> unit_caps = {}) {
  if (rule == layer_split_rule::even) {
    if (pp <= L && L % (pp * v) == 0) s.layers.assign(static_cast<std::size_t>(pp), L / pp);
  } else if (v <= 1) {
    s.layers = balanced_split(L, pp, fn, unit_caps);
  } else if (L % v == 0) {
    s.layers = balanced_split(
        L / v, pp, [&](stage_type t, int u) { return fn(t, u * v); }, unit_caps);
    for (int& c : s.layers) c *= v;
  }
  int f = 0;
  for (int j = 0; j < static_cast<int>(s.layers.size()); ++j) {
    const int c = at(s.layers, j);
    s.first.push_back(f);
    f += c;
    const double t = fn(type_of_stage(j, pp), c);
    s.times.push_back(t);
    s.tmax = std::max(s.tmax, t);
    s.tsum += t;
  }
}

}  // namespace detail
}  // namespace disttrain
