#pragma once
/// @file reorderer.hpp
/// @brief `reorderer`: turns a global batch's sample metadata into the sample
/// -> (module replica, microbatch, position) map, balancing every module's DP
/// replicas inside each microbatch and ordering the microbatches to minimise
/// the pipeline's iteration time.
///
/// Steps for a batch of n samples, K modules, m microbatches (docs/reorder.md):
/// 1. canonical order: samples sorted by id (duplicate ids are an error); module
///    totals T_k summed in that order; cost key `sum_k cost_k / T_k`; samples
///    ranked by (key descending, id ascending). Every cut but the arrival cut
///    reads only this ranking (detail/batch_ranking.hpp).
/// 2. slots: the ranking is cut into m slots of floor/ceil(n/m) samples
///    (detail/slot_cut.hpp)
///    (`size_sorted`: consecutive ranks, so a slot holds similar samples;
///    `balanced`: equal key totals; `arrival`: input order; `objective`, the
///    default, and `best`: candidate cuts and slot swaps scored by the
///    objective, see choose_cut).
/// 3. cells: for each slot and each module independently, the slot's samples
///    are split over the module's dp replicas by `partitioner` on that module's
///    costs. Modules are coupled only through the slots, so a module with a
///    different DP degree gets its own optimal-ish split of the same samples.
/// 4. order: per slot and stage, time = scale x slowest replica's load; the
///    `microbatch_orderer` picks the order minimising the objective.
/// The batch is checked first (detail/batch_checks.hpp) and the chosen plan
/// (detail/reorder_plan.hpp) written out last (detail/result_writer.hpp).
/// Cost: O(n log n + n K) plus the partition and order searches (bounded
/// budgets); after the first batch of a given size, no allocation except
/// growing `out` when the batch is larger than any before.
///
/// @snippet reorder.cpp reorderer_file

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/detail/batch_checks.hpp"
#include "disttrain/reorder/detail/batch_ranking.hpp"
#include "disttrain/reorder/detail/limited_split.hpp"
#include "disttrain/reorder/detail/reorder_plan.hpp"
#include "disttrain/reorder/detail/result_writer.hpp"
#include "disttrain/reorder/detail/slot_cut.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/ordering.hpp"
#include "disttrain/reorder/partition.hpp"
#include "disttrain/reorder/pipeline_time.hpp"
#include "disttrain/reorder/sample_meta.hpp"

namespace disttrain {

/// @brief Reusable reorderer for successive global batches. `Objective`
/// scores microbatch orders (default: exact 1F1B time, `pipeline_time`).
///
/// Deterministic: the same options and the same batch give a bit-identical
/// `reorder_result` on every rank and thread. With `slots = best`, `balanced`
/// or `size_sorted` also whatever the input order; the default `objective`
/// (the arrival cut is one of its candidates), `slot_policy::arrival` and
/// `balance_method::arrival` follow the input order: every rank must pass the
/// loader's one order.
/// Not thread-safe: one reorderer per thread.
/// @snippet reorder.cpp reorderer
template <order_objective Objective = pipeline_time>
class reorderer {
 public:
  /// @brief Validates and stores the options.
  explicit reorderer(reorder_options options, Objective objective = Objective{})
      : options_(std::move(options)), objective_(std::move(objective)) {
    options_.validate();
    if (options_.stages.empty()) {
      for (std::size_t k = 0; k < options_.modules.size(); ++k)
        options_.stages.push_back({static_cast<std::uint32_t>(k), 1.0, 2.0});
    }
    orderer_.budget = options_.order_budget;
    for (const reorder_module& mod : options_.modules) limited_ = limited_ || mod.limited();
  }

  /// @brief The options in use (stages filled in).
  [[nodiscard]] const reorder_options& options() const noexcept { return options_; }
  /// @brief The objective (e.g. to change its settings between batches).
  [[nodiscard]] Objective& objective() noexcept { return objective_; }
  /// @brief The partitioner (its tuning knobs are public members).
  [[nodiscard]] partitioner& balancer() noexcept { return partitioner_; }

  /// @brief Reorders one global batch into a new result.
  [[nodiscard]] reorder_result assign(std::span<const sample_meta> batch) {
    reorder_result out;
    assign(batch, out);
    return out;
  }

  /// @brief Reorders one global batch into `out`, reusing its buffers.
  ///
  /// Throws `errc::invalid_argument` at `batch` (empty, fewer samples than
  /// microbatches, modelled times that overflow), `batch[i].id` (duplicate id),
  /// `batch[i].cost[k]` (negative or non-finite cost, or the sample whose cost
  /// makes module k's total overflow); `errc::infeasible` at `reorder_options.modules[k].dp`
  /// when `equal_count` leaves a replica of module k without a sample, and for
  /// limits no split can keep (docs/reorder.md, "Per-microbatch limits"): at
  /// `reorder_options.modules[k].max_samples` / `.max_tokens` when the batch
  /// cannot fit them at all, at `batch[i].tokens[k]` naming the sample that
  /// fits no replica.
  void assign(std::span<const sample_meta> batch, reorder_result& out) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    detail::check_batch(options_, batch);
    reserve(n);
    // No cell ranking carries over from an earlier batch (zeros: not a ranking).
    plan_.ranking.assign(n * K, 0);
    saved_.ranking.assign(n * K, 0);
    ranking_.rank(batch, K);
    detail::check_batch_sums(options_, batch, ranking_);
    if ((options_.slots == slot_policy::best || options_.slots == slot_policy::objective) && m > 1)
      choose_cut(batch);
    else
      plan(batch, start_of(options_.slots));
    if (plan_.bad_slots != 0) fail_packing(batch);
    if (plan_.refined) finish_cells(batch);
    detail::write_result(batch, options_, plan_, ranking_, load_base_, sorted_index_, out);
  }

 private:
  // Step bodies: detail/reorderer.inl (each with its comment), in this order.

  // ---- plans: the incumbent rule, the two plan buffers ----
  // A candidate replaces the incumbent only when lower by a relative 1e-12
  // (ties: the incumbent). An infeasible plan (a cell breaking a per-replica
  // limit) scores +inf.
  [[nodiscard]] static bool better(double candidate, double incumbent) noexcept {
    if (std::isinf(incumbent)) return candidate < incumbent;
    return candidate < incumbent - std::abs(incumbent) * 1e-12;
  }
  static constexpr double infeasible_ = std::numeric_limits<double>::infinity();
  // The primary plan is a new candidate, the saved one the incumbent:
  // afterwards the saved plan is the better of the two.
  void keep_better() noexcept {
    if (better(plan_.time, saved_.time)) swap_plan();
  }
  // Exchanges the plan that write_result reads (steps 3-4) with the saved one.
  void swap_plan() noexcept { std::swap(plan_, saved_); }
  // Copies the primary plan into the saved buffers (capacity reserved: no allocation).
  void copy_plan() { saved_.copy_from(plan_); }
  [[noreturn]] void fail_packing(std::span<const sample_meta> batch) const;
  void reserve(std::size_t n);

  // ---- the cut (slot_policy::best / objective): candidates, cut search, baselines ----
  void choose_cut(std::span<const sample_meta> batch);
  void search_candidates(std::span<const sample_meta> batch);
  void screen_cuts(std::span<const sample_meta> batch, bool at_bounds, std::uint32_t order_budget);
  void compare_baselines(std::span<const sample_meta> batch);
  bool arrival_cannot_win(std::span<const sample_meta> batch);
  // `best` compares its two cuts with KK on cells of at most these many
  // replicas and samples (the winner then gets KK on every cell).
  static constexpr std::uint32_t screen_kk_max_bins = 16, screen_kk_max_items = 64;
  // best / objective estimate large cells' candidates (estimate_cells) from
  // this many samples per replica.
  static constexpr std::uint32_t estimate_per_replica = 8;

  // Swaps tried by a search and its limit.
  struct swap_budget {
    std::size_t tried = 0, limit = 0;
    [[nodiscard]] bool spent() const noexcept { return tried >= limit; }
  };
  // Two slots of a search, a before b.
  struct slot_pair {
    std::size_t a = 0, b = 0;
  };
  // A swap of the cut search: the members at plan_.seq positions `from` (in
  // slot slots.a) and `to` (in slot slots.b).
  struct cut_move {
    slot_pair slots;
    std::size_t from = 0, to = 0;
  };
  void search_cut(std::span<const sample_meta> batch);
  void rank_slots_by_stage_time();
  bool improve_cut(std::span<const sample_meta> batch, swap_budget& budget);
  bool swap_across(std::span<const sample_meta> batch, slot_pair s, swap_budget& budget);
  bool try_cut_swap(std::span<const sample_meta> batch, const cut_move& mv, double reference);

  // ---- one plan: slots (step 2), cells (step 3), order (step 4) ----
  using start = detail::slot_start;
  static constexpr start start_of(slot_policy p) noexcept {
    return p == slot_policy::arrival       ? start::arrival
           : p == slot_policy::size_sorted ? start::size_sorted
                                           : start::balanced;
  }
  // Steps 2-4 for one way of cutting slots, with the configured split and
  // order unless given (the no-reordering baseline of choose_cut).
  void plan(std::span<const sample_meta> batch, start first) {
    plan(batch, first, options_.balance, options_.order, true);
  }
  void plan(std::span<const sample_meta> batch, start first, balance_method balance,
            order_method order, bool slot_search, bool estimate = false);
  [[nodiscard]] std::size_t slot_begin(std::size_t j, std::size_t n) const noexcept {
    return detail::slot_layout{n, options_.microbatches}.begin(j);
  }
  // Step 2: plan_.seq = input indices grouped by slot (slot j = plan_.seq[slot_begin(j) ..)).
  void form_slots(std::span<const sample_meta> batch, start how, std::size_t module = 0) {
    plan_.seq.resize(batch.size());
    cutter_.cut(options_, batch, ranking_, detail::slot_cut{how, module}, plan_.seq);
  }

  // ---- step 2's slot search (balance potential) and work budgets ----
  using potential_t = std::pair<double, double>;  // (max_k imbalance_k, sum_k imbalance_k)
  static bool lower(const potential_t& x, const potential_t& y) noexcept {
    return x.first < y.first * (1 - 1e-12) ||
           (x.first <= y.first && x.second < y.second * (1 - 1e-12));
  }
  // The slot search's state: per module its ideal slot time (total / dp) and
  // the sum of its slot times; its potential (max and sum over the modules of
  // sum / ideal) is what the search lowers.
  struct slot_balance {
    std::array<double, max_reorder_modules> ideal{}, sum{};
    std::size_t modules = 0;
    [[nodiscard]] potential_t potential(const std::array<double, max_reorder_modules>& s) const {
      double worst = 0.0, all = 0.0;
      for (std::size_t k = 0; k < modules; ++k) {
        const double imb = ideal[k] > 0.0 ? s[k] / ideal[k] : 1.0;
        worst = std::max(worst, imb);
        all += imb;
      }
      return {worst, all};
    }
    // The module with the worst imbalance.
    [[nodiscard]] std::size_t worst() const {
      std::size_t kw = 0;
      for (std::size_t k = 1; k < modules; ++k)
        if (ideal[k] > 0.0 && (ideal[kw] <= 0.0 || sum[k] / ideal[k] > sum[kw] / ideal[kw])) kw = k;
      return kw;
    }
  };
  void choose_slots(std::span<const sample_meta> batch, start first);
  potential_t search_slots(std::span<const sample_meta> batch, std::uint32_t budget);
  void rank_slots_by_excess(std::span<const sample_meta> batch, std::size_t kw);
  bool improve_slots(std::span<const sample_meta> batch, slot_balance& bal, potential_t& cur,
                     swap_budget& tries);
  bool swap_members(std::span<const sample_meta> batch, slot_pair s, slot_balance& bal,
                    potential_t& cur, swap_budget& tries);
  void order_slots_by_excess(std::size_t m);
  double slot_time(std::span<const sample_meta> batch, std::size_t j, std::size_t k);
  [[nodiscard]] std::size_t split_units(std::size_t n) const noexcept;
  // A search's work budget: max(2^floor_log2, 4 n log2 n) units.
  [[nodiscard]] static std::size_t work_budget(std::size_t n, int floor_log2) noexcept {
    return std::max<std::size_t>(std::size_t{1} << floor_log2,
                                 4 * n * static_cast<std::size_t>(std::bit_width(n)));
  }

  // ---- per-replica limits: a cut that packs, cells that keep them ----
  void repair_cut(std::span<const sample_meta> batch, balance_method balance);
  [[nodiscard]] std::uint64_t slot_token_capacity(std::size_t k) const noexcept;
  std::pair<std::size_t, std::size_t> balancing_pair(std::span<const sample_meta> batch,
                                                     std::size_t a, std::size_t b, std::size_t k);
  std::size_t keep_limits(std::span<const sample_meta> batch,
                          std::span<const std::uint32_t> members, std::size_t k,
                          balance_method balance);
  bool split_fits(std::span<const sample_meta> batch, std::span<const std::uint32_t> members,
                  std::size_t k);
  [[nodiscard]] detail::replica_limits limits_of(const reorder_module& mod) const noexcept {
    return {mod.max_samples, mod.max_tokens, options_.equal_count};
  }

  // ---- step 3: cells ----
  void estimate_cells(std::span<const sample_meta> batch);
  void split_cells(std::span<const sample_meta> batch, balance_method balance);
  void split_slot(std::span<const sample_meta> batch, std::size_t j, balance_method balance);
  [[nodiscard]] std::span<std::uint32_t> cell_ranking(std::size_t j, std::size_t k) noexcept;
  void improve_cells(std::span<const sample_meta> batch);
  void finish_cells(std::span<const sample_meta> batch);
  void write_cell(std::span<const std::uint32_t> members, std::size_t j, std::size_t k);

  // ---- step 4: order ----
  void stage_times(std::span<const double> slowest, std::span<const std::uint32_t> rows);
  void order_slots(order_method method, bool from_current);
  double score_slots(std::span<const double> slowest);
  double score_current_order(std::span<const double> slowest);

  reorder_options options_;
  Objective objective_;
  bool limited_ = false;  // some module has a per-replica limit
  partitioner partitioner_;
  detail::slot_cutter cutter_;  // step 2
  detail::limited_split limiter_;
  std::vector<std::uint32_t> tokens_;
  std::vector<std::uint32_t> unfit_;  // keep_limits: a split that broke a limit, while finished
  std::vector<std::uint64_t> slot_tokens_;
  microbatch_orderer orderer_;
  detail::reorder_plan plan_;      // the primary plan: the one being built, scored, written
  detail::reorder_plan saved_;     // the plan set aside by swap_plan() (the incumbent)
  detail::batch_ranking ranking_;  // step 1
  std::vector<std::uint32_t> bins_, fill_, sorted_index_;
  std::vector<std::size_t> load_base_;
  std::vector<std::uint32_t> slot_order_, best_seq_, order_tmp_;
  std::vector<std::pair<start, std::size_t>> starts_;
  std::vector<double> costs_, fwd_, bwd_, slot_time_, excess_, lpt_, trial_;
};

}  // namespace disttrain

#include "disttrain/reorder/detail/reorderer.inl"
