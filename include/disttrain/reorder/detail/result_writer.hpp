#pragma once
/// @file result_writer.hpp
/// @brief Internal: the `reorderer`'s last step, a `reorder_plan` written out
/// as a `reorder_result` (samples by id, cells by (module, position, replica)
/// in CSR form, their loads, the iteration time and each module's imbalance).

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/detail/batch_ranking.hpp"
#include "disttrain/reorder/detail/reorder_plan.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain::detail {

/// @brief Writes `plan` for `batch` into `out`, reusing its buffers.
/// `load_base[k]` is the first (slot, replica) load of module k in
/// `plan.slot_load`; `sorted_index` is scratch (input index -> index by id).
inline void write_result(std::span<const sample_meta> batch, const reorder_options& options,
                         const reorder_plan& plan, const batch_ranking& ranking,
                         std::span<const std::size_t> load_base,
                         std::vector<std::uint32_t>& sorted_index, reorder_result& out) {
  const std::size_t n = batch.size();
  const std::size_t K = options.modules.size();
  const std::size_t m = options.microbatches;
  out.modules = static_cast<std::uint32_t>(K);
  out.microbatches = static_cast<std::uint32_t>(m);
  out.dp.fill(0);
  for (std::size_t k = 0; k < K; ++k) out.dp[k] = options.modules[k].dp;
  out.equal_count = options.equal_count;
  out.iteration_time = plan.time;
  out.imbalance.fill(0.0);
  for (std::size_t k = 0; k < K; ++k) {
    double sum = 0.0;
    for (std::size_t j = 0; j < m; ++j) sum += plan.slowest[k * m + j];
    const double ideal = ranking.total(k) / static_cast<double>(options.modules[k].dp);
    out.imbalance[k] = ideal > 0.0 ? sum / ideal : 1.0;
  }
  // Samples by id; sorted_index[input index] = index in out.samples.
  out.samples.resize(n);
  sorted_index.resize(n);
  for (std::size_t r = 0; r < n; ++r) {
    const std::uint32_t i = ranking.by_id()[r];
    sorted_index[i] = static_cast<std::uint32_t>(r);
    sample_place& p = out.samples[r];
    p.id = batch[i].id;
    p.microbatch = plan.position[plan.slot[i]];
    p.module = {};
    for (std::size_t k = 0; k < K; ++k)
      p.module[k] = module_place{plan.replica[i * K + k], plan.offset[i * K + k]};
  }
  // Cells ordered (module, position, replica).
  const auto cell_of = [&](std::size_t k, std::size_t pos, std::size_t r) {
    return load_base[k] + pos * options.modules[k].dp + r;
  };
  const std::size_t cells = load_base[K];
  out.cell_begin.resize(cells + 1);
  out.load.resize(cells);
  std::size_t c = 0;
  for (std::size_t k = 0; k < K; ++k) {
    const std::size_t dp = options.modules[k].dp;
    for (std::size_t p = 0; p < m; ++p) {
      const std::size_t j = plan.perm[p];
      for (std::size_t r = 0; r < dp; ++r, ++c)
        out.load[c] = plan.slot_load[load_base[k] + j * dp + r];
    }
  }
  // Cell sizes, then prefix sums.
  std::fill(out.cell_begin.begin(), out.cell_begin.end(), 0u);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t pos = plan.position[plan.slot[i]];
    for (std::size_t k = 0; k < K; ++k)
      ++out.cell_begin[cell_of(k, pos, plan.replica[i * K + k]) + 1];
  }
  for (std::size_t x = 0; x < cells; ++x) out.cell_begin[x + 1] += out.cell_begin[x];
  out.cell_samples.resize(n * K);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t pos = plan.position[plan.slot[i]];
    for (std::size_t k = 0; k < K; ++k)
      out.cell_samples[out.cell_begin[cell_of(k, pos, plan.replica[i * K + k])] +
                       plan.offset[i * K + k]] = sorted_index[i];
  }
}

}  // namespace disttrain::detail
