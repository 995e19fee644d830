#pragma once
/// @file options.hpp
/// @brief `reorder_options`: modules and their DP degrees, microbatch count and
/// its constraints, algorithms, and the pipeline the order is scored on.
///
/// @snippet reorder.cpp options_file

#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/ordering.hpp"
#include "disttrain/reorder/partition.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain {

/// @brief Most DP replicas of one reorder module (the partitioner's bin limit, 2^20).
inline constexpr std::uint32_t max_reorder_dp = max_partition_bins;
/// @brief Most cells (sum over modules of dp x microbatches) one reorderer
/// handles: 2^24 (its per-cell buffers then stay below ~0.5 GB).
inline constexpr std::uint64_t max_reorder_cells = std::uint64_t{1} << 24;

/// @brief A module as the reorderer sees it: a name (for messages), its DP
/// degree, and the per-microbatch limits of one replica (hard constraints: the
/// memory a replica has for one microbatch, a trainer's fixed micro-batch size).
/// @snippet reorder.cpp reorder_module
struct reorder_module {
  std::string name{};    ///< e.g. "encoder"; errors name it
  std::uint32_t dp = 1;  ///< data-parallel replicas, 1..max_reorder_dp
  /// Most samples one replica takes in one microbatch (0: no limit).
  std::uint32_t max_samples = 0;
  /// Most tokens (`sample_meta::tokens[k]`, summed) one replica takes in one microbatch (0: no limit).
  std::uint64_t max_tokens = 0;
  friend bool operator==(const reorder_module&, const reorder_module&) = default;
  /// @brief True if the module has a per-replica limit.
  [[nodiscard]] bool limited() const noexcept { return max_samples != 0 || max_tokens != 0; }
};

/// @brief One pipeline stage for scoring orders: its module and the share of
/// the module's per-microbatch cost it runs forward and backward.
/// @snippet reorder.cpp pipeline_stage
struct pipeline_stage {
  std::uint32_t module = 0;     ///< index into reorder_options::modules
  double forward_scale = 1.0;   ///< forward time = scale x slowest replica's load
  double backward_scale = 2.0;  ///< backward time = scale x load (0 for a frozen module)
  friend bool operator==(const pipeline_stage&, const pipeline_stage&) = default;
};

/// @brief Stages of a chain: module k split into `stages_per_module[k]` equal
/// stages (forward `fwd/n`, backward `bwd/n` of the load each).
/// @snippet reorder.cpp chain_stages
inline std::vector<pipeline_stage> chain_stages(std::span<const std::uint32_t> stages_per_module,
                                                double fwd = 1.0, double bwd = 2.0) {
  std::vector<pipeline_stage> out;
  for (std::size_t k = 0; k < stages_per_module.size(); ++k) {
    const std::uint32_t n = stages_per_module[k];
    for (std::uint32_t i = 0; i < n; ++i)
      out.push_back({static_cast<std::uint32_t>(k), fwd / static_cast<double>(n),
                     bwd / static_cast<double>(n)});
  }
  return out;
}

/// @brief How a global batch is cut into microbatch slots (before balancing).
enum class slot_policy : std::uint8_t {
  arrival,      ///< consecutive samples in arrival order (baseline; depends on input order)
  size_sorted,  ///< consecutive samples by descending cost key: similar samples share a slot
  balanced,     ///< equal-count slots with near-equal totals for every module
  best,  ///< order-independent: the best of the balanced, size-sorted, round-robin and id-order
         ///< cuts by the objective, then slot swaps that lower it (today's contract: the result
         ///< does not depend on the input order)
  objective,  ///< (default) `best`'s search with the arrival cut among the candidates, never
              ///< worse than the arrival cut split and ordered the same way, nor than no
              ///< reordering at all; depends on the input order (every rank sees the loader's)
};

/// @brief Name of a slot policy.
constexpr std::string_view to_string(slot_policy p) noexcept {
  switch (p) {
    case slot_policy::arrival: return "arrival";
    case slot_policy::size_sorted: return "size_sorted";
    case slot_policy::balanced: return "balanced";
    case slot_policy::best: return "best";
    case slot_policy::objective: return "objective";
  }
  return "unknown";
}

/// @brief Everything the reorderer needs besides the batch.
/// @snippet reorder.cpp reorder_options
struct reorder_options {
  std::vector<reorder_module> modules{};  ///< 1..max_reorder_modules; index = cost index
  std::uint32_t microbatches = 1;         ///< microbatch slots per global batch
  std::uint32_t microbatch_group = 1;     ///< microbatches must be a multiple (interleaving group)
  bool equal_count = false;               ///< near-equal sample counts per slot and per replica
  slot_policy slots = slot_policy::objective;        ///< slot formation
  balance_method balance = balance_method::refined;  ///< split of a slot over a module's replicas
  order_method order = order_method::search;         ///< microbatch order
  std::uint32_t order_budget = 1000;  ///< objective evaluations for order_method::search
  std::uint32_t slot_search_budget =
      512;  ///< slot swaps tried, all starts together (0: no slot search)
  std::uint32_t slot_search_below =
      4;  ///< ... only if some module has < this many samples per replica per slot
  std::uint32_t cut_search_budget =
      256;  ///< best/objective: slot swaps scored by the objective (0: candidates only)
  /// `refined`: work of the exact finish (branch and bound) on the chosen
  /// plan's small cells, all cells of a batch together, in search nodes x
  /// the cell's replicas (0: no exact finish; each cell also at most
  /// `partitioner::exact_node_budget` nodes). Bounds the time of a call.
  std::uint32_t exact_search_budget = 1u << 19;
  std::vector<pipeline_stage> stages{};  ///< scoring pipeline; empty: one stage per module

  friend bool operator==(const reorder_options&, const reorder_options&) = default;

  /// @brief Throws `errc::invalid_argument` naming the field.
  void validate() const {
    require(!modules.empty() && modules.size() <= max_reorder_modules, "reorder_options.modules",
            "needs 1..", max_reorder_modules, " modules, got ", modules.size());
    std::uint64_t dp_sum = 0;
    for (std::size_t k = 0; k < modules.size(); ++k) {
      require(modules[k].dp > 0 && modules[k].dp <= max_reorder_dp,
              cat("reorder_options.modules[", k, "].dp"), "module '", modules[k].name,
              "': dp must be in [1, ", max_reorder_dp, "], got ", modules[k].dp);
      dp_sum += modules[k].dp;
    }
    require_positive(microbatches, "reorder_options.microbatches");
    require(dp_sum * microbatches <= max_reorder_cells, "reorder_options.microbatches",
            microbatches, " microbatches x ", dp_sum,
            " replicas (all modules) = ", dp_sum * microbatches, " cells, exceeds the limit ",
            max_reorder_cells);
    require_positive(microbatch_group, "reorder_options.microbatch_group");
    require(microbatches % microbatch_group == 0, "reorder_options.microbatches", "microbatches ",
            microbatches, " must be a multiple of microbatch_group ", microbatch_group);
    for (std::size_t s = 0; s < stages.size(); ++s) {
      const std::string where = cat("reorder_options.stages[", s, "]");
      require(stages[s].module < modules.size(), where + ".module", "module ", stages[s].module,
              " >= modules ", modules.size());
      require(std::isfinite(stages[s].forward_scale) && stages[s].forward_scale >= 0.0,
              where + ".forward_scale", "must be finite and >= 0, got ", stages[s].forward_scale);
      require(std::isfinite(stages[s].backward_scale) && stages[s].backward_scale >= 0.0,
              where + ".backward_scale", "must be finite and >= 0, got ", stages[s].backward_scale);
    }
  }
};

/// @brief `o` with reordering switched off: the no-reordering baseline, the
/// sample map a loader without reordering produces (Megatron-LM's pretraining
/// sampler). Microbatch j is the j-th run of floor/ceil(n/m) samples in input
/// order (`slot_policy::arrival`); each module cuts it into contiguous chunks
/// over its replicas in input order (`balance_method::arrival`; with `n / m`
/// a multiple of dp, replica r of microbatch j gets samples `j n/m + r n/(m dp)
/// ..`, as Megatron's sampler deals them); microbatches run in input order
/// (`order_method::identity`); no slot search. Modules, microbatches, stages
/// and `equal_count` are kept, so the result's cells match `o`'s.
/// @snippet reorder.cpp arrival_order
[[nodiscard]] inline reorder_options arrival_order(reorder_options o) {
  o.slots = slot_policy::arrival;
  o.balance = balance_method::arrival;
  o.order = order_method::identity;
  o.slot_search_budget = 0;
  return o;
}

}  // namespace disttrain
