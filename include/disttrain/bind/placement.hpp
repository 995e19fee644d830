#pragma once
/// @file placement.hpp
/// @brief The bridge from the reorderer's `reorder_result` to the
/// communicator's `sample_placement`: for one microbatch, which replica of a
/// module holds which sample, in buffer order, numbered the way routes need.
///
/// A route (`plan_boundary_route`, `plan_stage_route`) joins two placements of
/// the same samples 0..n_j-1 of microbatch j. Every placement built here
/// numbers the samples of microbatch j the same way, whatever the module:
/// **local id l = rank of the sample's id among the ids of microbatch j**
/// (`microbatch_samples(res, j)[l]` is its index in `res.samples`, which is
/// sorted by id). Inside a replica the samples keep the reorderer's offsets.
/// So placements of different modules, built by separate calls on separate
/// ranks, always describe the same samples and can be routed against each
/// other; `activation_shape::rows[l]` belongs to the same local id.
///
/// Cost: O(n_j log n_j) for a microbatch of n_j samples (reads the cells, not
/// the whole batch).
///
/// @snippet bind.cpp placement_file

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/check.hpp"
#include "disttrain/reorder/assignment.hpp"

namespace disttrain {

namespace detail {

// Checks that `r` has the shape cell() relies on (so a default-constructed or
// hand-edited result gives an error, not an out-of-bounds read) and that
// `module` (field `module_field`) and `microbatch` are in range; `where`
// prefixes the field names.
inline void check_placement_args(const reorder_result& r, std::string_view where,
                                 std::size_t module, std::string_view module_field,
                                 std::size_t microbatch) {
  check_result_header(r);
  require(r.cell_begin.size() == r.cells() + 1, "reorder_result.cell_begin", "has ",
          r.cell_begin.size(), " entries, need ", r.cells() + 1);
  require(r.cell_samples.size() == r.samples.size() * r.modules, "reorder_result.cell_samples",
          "has ", r.cell_samples.size(),
          " entries, need samples x modules = ", r.samples.size() * r.modules);
  require(module < r.modules, cat(where, ".", module_field), "module ", module,
          " out of range: the result has ", r.modules, " modules");
  require(microbatch < r.microbatches, cat(where, ".microbatch"), "microbatch ", microbatch,
          " out of range: the result has ", r.microbatches, " microbatches");
}

// Checks that the cells of module k in microbatch j lie, in order, inside
// cell_samples (so reading them is safe).
inline void check_cells(const reorder_result& r, std::size_t k, std::size_t j) {
  // (Field names are built only on failure: this runs per microbatch and module.)
  for (std::size_t rep = 0; rep < r.dp[k]; ++rep) {
    const std::size_t c = r.cell_index(k, rep, j);
    if (!(r.cell_begin[c] <= r.cell_begin[c + 1] && r.cell_begin[c + 1] <= r.cell_samples.size()))
      fail(errc::invalid_argument,
           cat("reorder_result.module[", k, "].replica[", rep, "].microbatch[", j, "]"),
           "cell spans [", r.cell_begin[c], ", ", r.cell_begin[c + 1], ") outside ",
           r.cell_samples.size(), " entries");
  }
}

// Indices (into r.samples) listed in the cells of module k, microbatch j,
// ascending; checked against the samples' recorded microbatch.
inline std::vector<std::uint32_t> cell_members(const reorder_result& r, std::size_t k,
                                               std::size_t j) {
  check_cells(r, k, j);
  const std::size_t first = r.cell_index(k, 0, j), last = r.cell_index(k, r.dp[k], j);
  std::vector<std::uint32_t> members(
      r.cell_samples.begin() + static_cast<std::ptrdiff_t>(r.cell_begin[first]),
      r.cell_samples.begin() + static_cast<std::ptrdiff_t>(r.cell_begin[last]));
  std::sort(members.begin(), members.end());
  require(members.size() <= static_cast<std::size_t>(std::numeric_limits<int>::max()),
          cat("reorder_result.microbatch[", j, "]"), "has ", members.size(),
          " samples, a sample_placement holds at most ", std::numeric_limits<int>::max());
  const auto where = [&] { return cat("reorder_result.module[", k, "].microbatch[", j, "]"); };
  for (std::size_t l = 0; l < members.size(); ++l) {
    if (members[l] >= r.samples.size())
      fail(errc::invalid_argument, where(), "sample index ", members[l], " >= samples ",
           r.samples.size());
    if (l > 0 && members[l - 1] == members[l])
      fail(errc::invalid_argument, where(), "sample id ", r.samples[members[l]].id,
           " listed twice");
    if (r.samples[members[l]].microbatch != j)
      fail(errc::invalid_argument, where(), "lists sample id ", r.samples[members[l]].id,
           " placed in microbatch ", r.samples[members[l]].microbatch);
  }
  return members;
}

// Placement of module k in microbatch j over the local numbering `members`.
inline sample_placement placement_over(const reorder_result& r, std::size_t k, std::size_t j,
                                       std::span<const std::uint32_t> members) {
  check_cells(r, k, j);
  std::vector<std::vector<int>> lists(r.dp[k]);
  std::size_t listed = 0;
  for (std::size_t rep = 0; rep < r.dp[k]; ++rep) {
    const std::span<const std::uint32_t> cell = r.cell(k, rep, j);
    lists[rep].reserve(cell.size());
    for (const std::uint32_t idx : cell) {
      const auto it = std::lower_bound(members.begin(), members.end(), idx);
      if (it == members.end() || *it != idx)
        fail(errc::invalid_argument,
             cat("reorder_result.module[", k, "].replica[", rep, "].microbatch[", j, "]"),
             "sample index ", idx, " is not one of the microbatch's ", members.size(),
             " samples (modules disagree)");
      lists[rep].push_back(static_cast<int>(it - members.begin()));
    }
    listed += cell.size();
  }
  if (listed != members.size())
    fail(errc::invalid_argument, cat("reorder_result.module[", k, "].microbatch[", j, "]"),
         "holds ", listed, " samples, the microbatch has ", members.size(), " (modules disagree)");
  return sample_placement(std::move(lists));  // checks: each local id exactly once
}

}  // namespace detail

/// @brief The samples of microbatch `microbatch`, as indices into
/// `res.samples`, ascending (so by ascending id): entry l is local id l of
/// every placement of that microbatch. Throws `errc::invalid_argument` at
/// `microbatch_samples.microbatch` when out of range.
/// @snippet bind.cpp microbatch_samples
[[nodiscard]] inline std::vector<std::uint32_t> microbatch_samples(const reorder_result& res,
                                                                   std::size_t microbatch) {
  detail::check_placement_args(res, "microbatch_samples", 0, "module", microbatch);
  return detail::cell_members(res, 0, microbatch);
}

/// @brief Placement of module `module`'s DP replicas in microbatch
/// `microbatch`: replica r lists, in offset order, the local ids (see
/// `microbatch_samples`) of the samples `res.cell(module, r, microbatch)` gives
/// it. Throws `errc::invalid_argument` at `to_sample_placement.module` /
/// `.microbatch` when out of range, and at the offending cell when the result
/// is inconsistent (a sample lost or duplicated).
/// @snippet bind.cpp to_sample_placement
[[nodiscard]] inline sample_placement to_sample_placement(const reorder_result& res,
                                                          std::size_t module,
                                                          std::size_t microbatch) {
  detail::check_placement_args(res, "to_sample_placement", module, "module", microbatch);
  const std::vector<std::uint32_t> members = detail::cell_members(res, module, microbatch);
  return detail::placement_over(res, module, microbatch, members);
}

/// @brief Both ends of a route in one microbatch: the placements of the
/// sending and the receiving module over one local numbering, and that
/// numbering (`samples[l]` = index into `reorder_result::samples` of local id l).
/// @snippet bind.cpp route_placements
struct route_placements {
  std::vector<std::uint32_t> samples;  ///< local id -> index into reorder_result::samples
  sample_placement from;               ///< placement of the sending module
  sample_placement to;                 ///< placement of the receiving module
};

/// @brief Placements of `from_module` and `to_module` in microbatch
/// `microbatch`, ready for `plan_boundary_route` (or, with
/// `from_module == to_module`, `plan_stage_route`). Throws
/// `errc::invalid_argument` at `placements_for_route.from_module`,
/// `.to_module` or `.microbatch` when out of range, and at the offending cell
/// when the two modules do not hold the same samples.
/// @snippet bind.cpp placements_for_route
[[nodiscard]] inline route_placements placements_for_route(const reorder_result& res,
                                                           std::size_t microbatch,
                                                           std::size_t from_module,
                                                           std::size_t to_module) {
  detail::check_placement_args(res, "placements_for_route", from_module, "from_module", microbatch);
  detail::check_placement_args(res, "placements_for_route", to_module, "to_module", microbatch);
  route_placements rp;
  rp.samples = detail::cell_members(res, from_module, microbatch);
  rp.from = detail::placement_over(res, from_module, microbatch, rp.samples);
  rp.to = from_module == to_module ? rp.from
                                   : detail::placement_over(res, to_module, microbatch, rp.samples);
  return rp;
}

/// @brief Every module's placement in one microbatch over one local
/// numbering: what a rank needs to plan all its routes of microbatch j. The
/// members are read and sorted once (calling `to_sample_placement` per module
/// would redo that per call).
/// @snippet bind.cpp microbatch_placement
struct microbatch_placement {
  std::vector<std::uint32_t> samples;    ///< local id -> index into reorder_result::samples
  std::vector<sample_placement> module;  ///< one per module of the result
};

/// @brief Placements of every module in microbatch `microbatch` (see
/// `microbatch_placement`), or only of the modules listed in `modules` (the
/// others stay empty: `dp() == 0`), e.g. the modules around one rank. Throws
/// `errc::invalid_argument` like `to_sample_placement`, and at
/// `microbatch_placements.modules` for a module out of range.
/// @snippet bind.cpp microbatch_placements
[[nodiscard]] inline microbatch_placement microbatch_placements(
    const reorder_result& res, std::size_t microbatch, std::span<const std::size_t> modules = {}) {
  detail::check_placement_args(res, "microbatch_placements", 0, "module", microbatch);
  microbatch_placement mp;
  mp.samples = detail::cell_members(res, 0, microbatch);
  mp.module.resize(res.modules);
  for (std::size_t k = 0; k < res.modules; ++k) {
    const bool listed =
        modules.empty() || std::find(modules.begin(), modules.end(), k) != modules.end();
    if (listed) mp.module[k] = detail::placement_over(res, k, microbatch, mp.samples);
  }
  for (const std::size_t k : modules)
    require(k < res.modules, "microbatch_placements.modules", "module ", k,
            " out of range: the result has ", res.modules, " modules");
  return mp;
}

}  // namespace disttrain
