#pragma once
/// @file assignment.hpp
/// @brief `reorder_result`: the one sample -> (module replica, microbatch,
/// position) map that the data loader, the communicator's routes and the
/// executor all read, with its validation (JSON form: reorder/json.hpp).
///
/// Every module sees every sample exactly once: sample `i` is processed in
/// microbatch `samples[i].microbatch` (an execution position: 0 runs first) by
/// replica `samples[i].module[k].replica` of module `k`, at position
/// `samples[i].module[k].offset` inside that replica's part of the microbatch.
/// `cell(k, r, j)` lists the samples replica `r` of module `k` gets in
/// microbatch `j`, in offset order.
///
/// @snippet reorder.cpp assignment

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain {

/// @brief Where one module processes a sample: its DP replica and the
/// sample's position inside that replica's share of the microbatch.
/// @snippet reorder.cpp module_place
struct module_place {
  std::uint32_t replica = 0;  ///< DP replica of the module, < dp
  std::uint32_t offset = 0;   ///< position within (replica, microbatch)
  friend bool operator==(const module_place&, const module_place&) = default;
};

/// @brief Placement of one sample: its microbatch and, per module, its place.
/// @snippet reorder.cpp sample_place
struct sample_place {
  std::uint64_t id = 0;          ///< the sample's id
  std::uint32_t microbatch = 0;  ///< execution position of its microbatch (0 runs first)
  /// Per module; entries >= modules are zero. (One line on purpose: nvcc
  /// reads a line starting with `module` as a C++20 module directive.)
  std::array<module_place, max_reorder_modules> module{};
  friend bool operator==(const sample_place&, const sample_place&) = default;
};

/// @brief The reorderer's output for one global batch (a plain value type).
///
/// `samples` is sorted by id, so the value is identical on every rank and
/// independent of the order the batch arrived in. Cells are indexed
/// (module, microbatch, replica); `cell_begin`/`cell_samples` list each
/// cell's samples (indices into `samples`) in offset order.
/// @snippet reorder.cpp reorder_result
struct reorder_result {
  std::uint32_t modules = 0;                            ///< module count K
  std::uint32_t microbatches = 0;                       ///< microbatch count m
  std::array<std::uint32_t, max_reorder_modules> dp{};  ///< DP degree per module
  bool equal_count = false;                             ///< built in equal-count mode
  std::vector<sample_place> samples;                    ///< one per sample, sorted by id
  std::vector<std::uint32_t> cell_begin;                ///< CSR row starts, size cells()+1
  std::vector<std::uint32_t> cell_samples;              ///< sample indices per cell, by offset
  std::vector<double> load;     ///< summed module cost per cell (empty if unknown)
  double iteration_time = 0.0;  ///< objective value of the chosen order
  std::array<double, max_reorder_modules>
      imbalance{};  ///< per module: sum_j max_r load / (total / dp)

  /// @brief Index of cell (module k, replica r, microbatch j): the argument
  /// order of `cell` and `cell_load`. Cells are stored module-major, then by
  /// microbatch, then by replica.
  [[nodiscard]] std::size_t cell_index(std::size_t k, std::size_t r, std::size_t j) const noexcept {
    std::size_t base = 0;
    for (std::size_t q = 0; q < k; ++q) base += static_cast<std::size_t>(dp[q]) * microbatches;
    return base + j * dp[k] + r;
  }
  /// @brief Number of cells: microbatches * sum of dp.
  [[nodiscard]] std::size_t cells() const noexcept {
    std::size_t c = 0;
    for (std::size_t k = 0; k < modules; ++k) c += dp[k];
    return c * microbatches;
  }
  /// @brief Samples (indices into `samples`) of replica `r` of module `k` in microbatch `j`.
  [[nodiscard]] std::span<const std::uint32_t> cell(std::size_t k, std::size_t r,
                                                    std::size_t j) const {
    require(k < modules, "reorder_result.module", "module ", k, " out of range, modules=", modules);
    require(r < dp[k], "reorder_result.replica", "replica ", r, " out of range, dp=", dp[k]);
    require(j < microbatches, "reorder_result.microbatch", "microbatch ", j,
            " out of range, microbatches=", microbatches);
    const std::size_t c = cell_index(k, r, j);
    return std::span<const std::uint32_t>(cell_samples)
        .subspan(cell_begin[c], cell_begin[c + 1] - cell_begin[c]);
  }
  /// @brief Load of replica `r` of module `k` in microbatch `j` (0 if loads are unknown).
  [[nodiscard]] double cell_load(std::size_t k, std::size_t r, std::size_t j) const {
    (void)cell(k, r, j);  // range checks
    return load.empty() ? 0.0 : load[cell_index(k, r, j)];
  }
  /// @brief Load of the slowest replica of module `k` in microbatch `j`.
  [[nodiscard]] double slowest(std::size_t k, std::size_t j) const {
    double m = 0.0;
    for (std::size_t r = 0; r < dp[k]; ++r) m = std::max(m, cell_load(k, r, j));
    return m;
  }
  /// @brief Placement of sample `id`, or nullptr (binary search).
  [[nodiscard]] const sample_place* find(std::uint64_t id) const noexcept {
    auto it = std::lower_bound(samples.begin(), samples.end(), id,
                               [](const sample_place& p, std::uint64_t v) { return p.id < v; });
    return it != samples.end() && it->id == id ? &*it : nullptr;
  }

  friend bool operator==(const reorder_result&, const reorder_result&) = default;
};

namespace detail {

inline void check_result_header(const reorder_result& r) {
  require_in_range<std::uint32_t>(r.modules, 1, static_cast<std::uint32_t>(max_reorder_modules),
                                  "reorder_result.modules");
  require_positive(r.microbatches, "reorder_result.microbatches");
  for (std::size_t k = 0; k < r.modules; ++k)
    require_positive(r.dp[k], cat("reorder_result.dp[", k, "]"));
  require(!r.samples.empty(), "reorder_result.samples", "no samples");
}

// Counts of an equal split of `n` into `parts`: floor or ceil.
inline bool near_equal(std::size_t count, std::size_t n, std::size_t parts) noexcept {
  return count == n / parts || (n % parts != 0 && count == n / parts + 1);
}

}  // namespace detail

/// @brief Rebuilds `cell_begin`/`cell_samples` from the placements (used after
/// reading JSON). Throws `errc::invalid_argument` naming the sample when a
/// field is out of range or two samples share a (module, replica, microbatch, offset).
inline void rebuild_cells(reorder_result& r) {
  detail::check_result_header(r);
  const std::size_t cells = r.cells();
  r.cell_begin.assign(cells + 1, 0);
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    const sample_place& p = r.samples[i];
    require(
        p.microbatch < r.microbatches,
        [&] { return cat("reorder_result.samples[", i, "].microbatch"); }, "microbatch ",
        p.microbatch, " >= microbatches ", r.microbatches);
    for (std::size_t k = 0; k < r.modules; ++k) {
      require(
          p.module[k].replica < r.dp[k],
          [&] { return cat("reorder_result.samples[", i, "].module[", k, "].replica"); },
          "replica ", p.module[k].replica, " >= dp ", r.dp[k]);
      ++r.cell_begin[r.cell_index(k, p.module[k].replica, p.microbatch) + 1];
    }
  }
  for (std::size_t c = 0; c < cells; ++c) r.cell_begin[c + 1] += r.cell_begin[c];
  constexpr std::uint32_t unset = 0xffffffffu;
  r.cell_samples.assign(r.samples.size() * r.modules, unset);
  for (std::size_t i = 0; i < r.samples.size(); ++i) {
    const sample_place& p = r.samples[i];
    for (std::size_t k = 0; k < r.modules; ++k) {
      const std::size_t c = r.cell_index(k, p.module[k].replica, p.microbatch);
      const std::size_t size = r.cell_begin[c + 1] - r.cell_begin[c];
      const std::string where = cat("reorder_result.samples[", i, "].module[", k, "].offset");
      require(p.module[k].offset < size, where, "offset ", p.module[k].offset, " >= cell size ",
              size);
      std::uint32_t& slot = r.cell_samples[r.cell_begin[c] + p.module[k].offset];
      require(slot == unset, where, "sample id ", p.id, " and id ",
              slot == unset ? 0 : r.samples[slot].id, " share module ", k, " replica ",
              p.module[k].replica, " microbatch ", p.microbatch, " offset ", p.module[k].offset);
      slot = static_cast<std::uint32_t>(i);
    }
  }
}

/// @brief Checks a result: ids unique and sorted, every field in range, every
/// sample exactly once in each module's cells at its recorded offset, loads
/// sized per cell, and (equal-count mode) near-equal counts per microbatch and
/// per replica. Throws `errc::invalid_argument` at the offending field.
/// @snippet reorder.cpp validate
inline void validate(const reorder_result& r) {
  detail::check_result_header(r);
  const std::size_t n = r.samples.size();
  for (std::size_t i = 1; i < n; ++i)
    require(
        r.samples[i - 1].id < r.samples[i].id,
        [&] { return cat("reorder_result.samples[", i, "].id"); },
        "ids must be unique and ascending: ", r.samples[i - 1].id, " then ", r.samples[i].id);
  const std::size_t cells = r.cells();
  require(r.cell_begin.size() == cells + 1, "reorder_result.cell_begin", "has ",
          r.cell_begin.size(), " entries, need ", cells + 1);
  require(r.cell_samples.size() == n * r.modules, "reorder_result.cell_samples", "has ",
          r.cell_samples.size(), " entries, need samples x modules = ", n * r.modules);
  require(r.load.empty() || r.load.size() == cells, "reorder_result.load", "has ", r.load.size(),
          " entries, need ", cells);
  require(r.cell_begin[0] == 0 && r.cell_begin[cells] == n * r.modules, "reorder_result.cell_begin",
          "must start at 0 and end at ", n * r.modules);
  std::vector<std::uint32_t> seen(n, 0);
  std::vector<std::size_t> slot_count(r.microbatches, 0);
  for (std::size_t i = 0; i < n; ++i) {
    require(
        r.samples[i].microbatch < r.microbatches,
        [&] { return cat("reorder_result.samples[", i, "].microbatch"); }, "microbatch ",
        r.samples[i].microbatch, " >= microbatches ", r.microbatches);
    ++slot_count[r.samples[i].microbatch];
  }
  for (std::size_t k = 0; k < r.modules; ++k) {
    std::fill(seen.begin(), seen.end(), 0u);
    for (std::size_t j = 0; j < r.microbatches; ++j) {
      for (std::size_t rep = 0; rep < r.dp[k]; ++rep) {
        const std::size_t c = r.cell_index(k, rep, j);
        require(r.cell_begin[c] <= r.cell_begin[c + 1], "reorder_result.cell_begin",
                "must be non-decreasing at cell ", c);
        const std::size_t size = r.cell_begin[c + 1] - r.cell_begin[c];
        const std::string where =
            cat("reorder_result.module[", k, "].replica[", rep, "].microbatch[", j, "]");
        if (r.equal_count)
          require(detail::near_equal(size, slot_count[j], r.dp[k]), where, "equal_count: ", size,
                  " samples, microbatch has ", slot_count[j], " over ", r.dp[k], " replicas");
        for (std::size_t o = 0; o < size; ++o) {
          const std::uint32_t idx = r.cell_samples[r.cell_begin[c] + o];
          require(idx < n, where, "sample index ", idx, " >= samples ", n);
          const sample_place& p = r.samples[idx];
          require(p.microbatch == j && p.module[k].replica == rep && p.module[k].offset == o, where,
                  "sample id ", p.id, " listed at offset ", o, " but placed at microbatch ",
                  p.microbatch, " replica ", p.module[k].replica, " offset ", p.module[k].offset);
          require(seen[idx] == 0, where, "sample id ", p.id, " appears twice in module ", k);
          seen[idx] = 1;
        }
      }
    }
    for (std::size_t i = 0; i < n; ++i)
      require(
          seen[i] == 1, [&] { return cat("reorder_result.samples[", i, "]"); }, "sample id ",
          r.samples[i].id, " is missing from module ", k);
  }
  if (r.equal_count)
    for (std::size_t j = 0; j < r.microbatches; ++j)
      require(
          detail::near_equal(slot_count[j], n, r.microbatches),
          [&] { return cat("reorder_result.microbatch[", j, "]"); }, "equal_count: ", slot_count[j],
          " samples, batch has ", n, " over ", r.microbatches, " microbatches");
}

}  // namespace disttrain
