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
    detail::write_result(batch, options_, plan_, ranking_, load_base_, sorted_index_, out);
  }

 private:
  // Incumbent rule shared by every comparison of plans: a candidate replaces
  // the incumbent only when lower by a relative 1e-12 (ties: the incumbent).
  // An infeasible plan (a cell breaking a per-replica limit) scores +inf.
  [[nodiscard]] static bool better(double candidate, double incumbent) noexcept {
    if (std::isinf(incumbent)) return candidate < incumbent;
    return candidate < incumbent - std::abs(incumbent) * 1e-12;
  }
  static constexpr double infeasible_ = std::numeric_limits<double>::infinity();

  // The chosen plan still has a cell no split could fit (every cut tried had
  // one): names the first such slot's unplaced sample.
  [[noreturn]] void fail_packing(std::span<const sample_meta> batch) const {
    const std::size_t n = batch.size();
    for (std::size_t j = 0; j < plan_.bad.size(); ++j) {
      if (plan_.bad[j].sample == 0) continue;
      const std::uint32_t i = plan_.bad[j].sample - 1;
      const std::size_t k = plan_.bad[j].module;
      const reorder_module& mod = options_.modules[k];
      std::uint64_t tokens = 0;
      for (std::size_t x = slot_begin(j, n); x < slot_begin(j + 1, n); ++x)
        tokens += batch[plan_.seq[x]].tokens[k];
      fail(errc::infeasible, cat("batch[", i, "].tokens[", k, "]"), "sample id ", batch[i].id, " (",
           batch[i].tokens[k], " tokens) finds no replica of module '", mod.name,
           "' with room in microbatch ", plan_.position[j], " (",
           slot_begin(j + 1, n) - slot_begin(j, n), " samples, ", tokens, " tokens over dp ",
           mod.dp, "; limits: max_samples ", mod.max_samples, ", max_tokens ", mod.max_tokens,
           " per replica); use more microbatches, or raise the limit");
    }
    fail(errc::internal, "reorderer", "infeasible plan without a failed cell");
  }

  // The primary plan is a new candidate, the saved one the incumbent:
  // afterwards the saved plan is the better of the two.
  void keep_better() noexcept {
    if (better(plan_.time, saved_.time)) swap_plan();
  }

  // slot_policy::best / objective (m > 1): the objective decides the cut.
  // 1. candidate cuts (balanced, size-sorted, round-robin, id order, and for
  //    objective the arrival cut first), each split
  //    (refined: KK screened to small cells) and ordered by the order
  //    search's seeds alone; the lowest wins and gets the full order search;
  // 2. slot swaps on the winner while they lower the objective (search_cut);
  // 3. refined: the wide local search pass, KK and MULTIFIT (partitioner::
  //    improve) on every cell of the winner, kept only if not worse;
  // 4. objective: compared with the arrival cut split and ordered as configured
  //    (the full split) and with no reordering at all (arrival cut, arrival
  //    chunks, arrival order; when that wins, the same with the configured
  //    split if not above); the lowest is kept. So by construction the
  //    result is never worse than either, and (both modes) never worse than
  //    any candidate of step 1 as screened.
  void choose_cut(std::span<const sample_meta> batch) {
    const std::size_t n = batch.size();
    const std::size_t m = options_.microbatches;
    const bool by_objective = options_.slots == slot_policy::objective;
    const bool screen = options_.balance == balance_method::refined;
    const std::uint32_t kk_bins = partitioner_.refine_kk_max_bins,
                        kk_items = partitioner_.refine_kk_max_items;
    {
      // The user's limits come back even if a plan throws (e.g. the objective).
      struct restore {
        partitioner& p;
        microbatch_orderer& o;
        std::uint32_t bins, items, fit;
        double wide;
        std::uint32_t budget;
        ~restore() {
          p.refine_kk_max_bins = bins;
          p.refine_kk_max_items = items;
          p.refine_fit_steps = fit;
          p.refine_wide_gap = wide;
          o.budget = budget;
        }
      } guard{partitioner_,
              orderer_,
              kk_bins,
              kk_items,
              partitioner_.refine_fit_steps,
              partitioner_.refine_wide_gap,
              orderer_.budget};
      if (screen) {  // the steps improve_cells adds to the winner
        partitioner_.refine_kk_max_bins = std::min(kk_bins, screen_kk_max_bins);
        partitioner_.refine_kk_max_items = std::min(kk_items, screen_kk_max_items);
        partitioner_.refine_fit_steps = 0;
        partitioner_.refine_wide_gap = std::numeric_limits<double>::infinity();
      }
      static constexpr std::array<start, 5> candidates{
          start::arrival, start::balanced, start::size_sorted, start::dealt, start::by_id};
      // Large cells (slots of more than screen_kk_max_items samples and at
      // least estimate_per_replica samples per replica in every module): the
      // candidates are compared with every cell at its lower bound
      // max(slot total / dp, largest sample) (O(n K), no split; the refined
      // split is within ~0.5 % of it there) and only the winner is split.
      bool estimate = screen && n / m > screen_kk_max_items;
      for (const reorder_module& mod : options_.modules)
        estimate = estimate && n / m >= std::size_t{estimate_per_replica} * mod.dp;
      const auto screen_cuts = [&](bool at_bounds) {
        // Candidates are ordered by the search's seeds only (no local search):
        // the full search runs once, on the winner.
        orderer_.budget = 0;
        bool first = true;
        // The arrival cut is a candidate only where candidates are split: its
        // uneven slots look better at their lower bounds than they split, and
        // step 4 plans it in full anyway.
        for (const start c : std::span(candidates).subspan(by_objective && !at_bounds ? 0 : 1)) {
          // The balance-potential slot search (small cells) from the two cuts it
          // searched before; the other candidates as cut.
          plan(batch, c, options_.balance, options_.order,
               c == start::balanced || c == start::size_sorted, at_bounds);
          if (first)
            swap_plan();
          else
            keep_better();
          first = false;
        }
        swap_plan();  // the winner back in the primary buffers
        orderer_.budget = guard.budget;
        if (at_bounds) {  // the winner's cells
          split_cells(batch, options_.balance);
          if (plan_.bad_slots != 0) repair_cut(batch, options_.balance);
        }
      };
      screen_cuts(estimate);
      // Under per-replica limits, a winner chosen at its lower bounds may not
      // pack: then every candidate is split (and repaired) and compared again.
      if (estimate && plan_.bad_slots != 0) screen_cuts(false);
      order_slots(options_.order, true);  // the full order search, from the current order
      search_cut(batch);
    }
    if (screen) {
      copy_plan();  // the winner as searched, in case the improved cells score worse
      improve_cells(batch);
      if (!(plan_.time <= saved_.time)) swap_plan();
    }
    if (!by_objective) return;
    // The baselines replace the searched cut when lower by any amount, so the
    // result is never above either, not even by a rounding difference.
    swap_plan();  // incumbent: the searched cut
    if (arrival_cannot_win(batch)) {
      swap_plan();
      return;
    }
    plan(batch, start::arrival, options_.balance, options_.order, false);
    if (plan_.time < saved_.time) swap_plan();
    plan(batch, start::arrival, balance_method::arrival, order_method::identity, false);
    if (plan_.time < saved_.time) {
      // No reordering won. Where the split is off the critical path (another
      // module's stage dominates), it wins only by a rounding difference, and
      // the same cut and order with the configured split scores the same:
      // that balanced plan is kept whenever it is not above.
      swap_plan();
      plan(batch, start::arrival, options_.balance, order_method::identity, false);
      if (plan_.time <= saved_.time) swap_plan();
    }
    swap_plan();
  }

  // Step 4's shortcut, with the incumbent in saved_: true when no split and
  // no order of the arrival cut can come in below the incumbent, so neither
  // baseline can replace it and planning them would not change the result.
  // The arrival cut's cells at their lower bounds (estimate_cells) give stage
  // times below any split's; the objective's order-free lower bound of those
  // (only objectives that have one, e.g. pipeline_time) is below any time the
  // baselines could score, with a margin far above the bound's rounding.
  // Uses the primary buffers as scratch: the caller then plans the baselines
  // into them, or (true) swaps the incumbent back.
  bool arrival_cannot_win(std::span<const sample_meta> batch) {
    if constexpr (requires(const Objective& o, const microbatch_times& t) {
                    { o.lower_bound(t) } -> std::convertible_to<double>;
                  }) {
      if (std::isinf(saved_.time)) return false;
      form_slots(batch, start::arrival);
      estimate_cells(batch);
      stage_times(plan_.slowest, {});
      const std::size_t m = options_.microbatches, S = options_.stages.size();
      const double bound = objective_.lower_bound(microbatch_times{m, S, fwd_, bwd_});
      return bound * (1.0 - 1e-9) >= saved_.time;
    } else {
      (void)batch;
      return false;
    }
  }

  [[nodiscard]] std::size_t slot_begin(std::size_t j, std::size_t n) const noexcept {
    return detail::slot_layout{n, options_.microbatches}.begin(j);
  }

  // Grows every buffer any path may use for a batch of n samples, so a later
  // batch of at most n samples allocates nothing, whichever path it takes.
  void reserve(std::size_t n) {
    const std::size_t K = options_.modules.size(), m = options_.microbatches,
                      S = options_.stages.size();
    std::size_t dp_sum = 0, dp_max = 0;
    for (const auto& mod : options_.modules) {
      dp_sum += mod.dp;
      dp_max = std::max<std::size_t>(dp_max, mod.dp);
    }
    const auto grow = [](auto& v, std::size_t size) {
      if (v.capacity() < size) v.reserve(size);
    };
    ranking_.reserve(n);
    cutter_.reserve(n, options_);
    for (auto* v :
         {&plan_.seq, &bins_, &sorted_index_, &plan_.slot, &best_seq_, &saved_.slot, &saved_.seq})
      grow(*v, n);
    for (auto* v : {&plan_.replica, &plan_.offset, &plan_.ranking, &saved_.replica, &saved_.offset,
                    &saved_.ranking})
      grow(*v, n * K);
    grow(fill_, std::max({n, m, dp_max}));
    for (auto* v :
         {&plan_.perm, &plan_.position, &slot_order_, &saved_.perm, &saved_.position, &order_tmp_})
      grow(*v, m);
    grow(load_base_, K + 1);
    grow(costs_, n);
    grow(plan_.slot_load, dp_sum * m);
    grow(saved_.slot_load, dp_sum * m);
    for (auto* v : {&plan_.slowest, &saved_.slowest, &slot_time_, &lpt_, &trial_}) grow(*v, K * m);
    grow(excess_, m);
    grow(plan_.bad, m);
    grow(saved_.bad, m);
    if (limited_) {
      grow(tokens_, n);
      grow(slot_tokens_, m * K);
      limiter_.reserve(n, dp_max);
    }
    grow(fwd_, m * S);
    grow(bwd_, m * S);
    grow(starts_, 4 + K);
  }

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
            order_method order, bool slot_search, bool estimate = false) {
    if (slot_search)
      choose_slots(batch, first);
    else
      form_slots(batch, first);
    if (estimate) {
      estimate_cells(batch);
    } else {
      split_cells(batch, balance);
      if (plan_.bad_slots != 0) repair_cut(batch, balance);
    }
    order_slots(order, false);
  }

  // Under per-replica limits, while a slot has a cell no split could fit:
  // swap the slot's sample with the most tokens of the failing module for the
  // sample with the fewest of a roomier slot (slots by that module's tokens,
  // fewest first), and re-split both. A swap is kept when it lowers the
  // number of failing slots, or keeps it and lowers the tokens above the
  // slots' capacities (dp x max_tokens), or keeps both and lightens the failing
  // slot without making the other fail. At most 4 m + 64 swaps are tried.
  void repair_cut(std::span<const sample_meta> batch, balance_method balance) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    slot_tokens_.assign(m * K, 0);
    for (std::size_t j = 0; j < m; ++j)
      for (std::size_t x = slot_begin(j, n); x < slot_begin(j + 1, n); ++x)
        for (std::size_t k = 0; k < K; ++k)
          slot_tokens_[j * K + k] += batch[plan_.seq[x]].tokens[k];
    const auto over = [&](std::size_t j) {
      std::uint64_t sum = 0;
      for (std::size_t k = 0; k < K; ++k) {
        const std::uint64_t cap = slot_token_capacity(k), t = slot_tokens_[j * K + k];
        if (cap != 0 && t > cap) sum += t - cap;
      }
      return sum;
    };
    std::uint64_t excess = 0;
    for (std::size_t j = 0; j < m; ++j) excess += over(j);
    const auto move = [&](std::uint32_t u, std::size_t from, std::size_t to) {
      for (std::size_t k = 0; k < K; ++k) {
        slot_tokens_[from * K + k] -= batch[u].tokens[k];
        slot_tokens_[to * K + k] += batch[u].tokens[k];
      }
    };
    // Position of input index u in slot j (split_slot may reorder a slot's members).
    const auto find = [&](std::uint32_t u, std::size_t j) {
      std::size_t x = slot_begin(j, n);
      while (plan_.seq[x] != u) ++x;
      return x;
    };
    std::size_t tries = 4 * m + 64;
    while (plan_.bad_slots != 0 && tries > 0) {
      bool kept = false;
      for (std::size_t a = 0; a < m && !kept && tries > 0; ++a) {
        if (plan_.bad[a].sample == 0) continue;
        const std::size_t k = plan_.bad[a].module;
        excess_.resize(m);
        for (std::size_t b = 0; b < m; ++b)
          excess_[b] = -static_cast<double>(slot_tokens_[b * K + k]);
        order_slots_by_excess(m);  // fewest tokens of module k first
        for (std::size_t bi = 0; bi < m && !kept && tries > 0; ++bi) {
          const std::size_t b = slot_order_[bi];
          if (b == a || slot_tokens_[b * K + k] >= slot_tokens_[a * K + k]) continue;
          const auto [xa, yb] = balancing_pair(batch, a, b, k);
          if (xa == n) continue;
          const std::uint32_t u = plan_.seq[xa], v = plan_.seq[yb];
          --tries;
          const std::size_t bad_before = plan_.bad_slots;
          const std::uint64_t a_tokens = slot_tokens_[a * K + k];
          const std::uint64_t rest = excess - over(a) - over(b);
          std::swap(plan_.seq[xa], plan_.seq[yb]);
          move(u, a, b);
          move(v, b, a);
          split_slot(batch, a, balance);
          split_slot(batch, b, balance);
          const std::uint64_t now = rest + over(a) + over(b);
          if (plan_.bad_slots < bad_before || (plan_.bad_slots == bad_before && now < excess) ||
              (plan_.bad_slots == bad_before && now == excess && plan_.bad[b].sample == 0 &&
               slot_tokens_[a * K + k] < a_tokens)) {
            excess = now;
            kept = true;
            break;
          }
          std::swap(plan_.seq[find(v, a)], plan_.seq[find(u, b)]);
          move(u, b, a);
          move(v, a, b);
          split_slot(batch, a, balance);
          split_slot(batch, b, balance);
        }
      }
      if (!kept) break;
    }
  }

  // Tokens module k's cells of one slot hold together: dp x max_tokens,
  // saturated at 2^64 - 1 (0: no token limit).
  [[nodiscard]] std::uint64_t slot_token_capacity(std::size_t k) const noexcept {
    const std::uint64_t limit = options_.modules[k].max_tokens, dp = options_.modules[k].dp;
    return limit > std::numeric_limits<std::uint64_t>::max() / dp
               ? std::numeric_limits<std::uint64_t>::max()
               : limit * dp;
  }

  // Positions (x in slot a, y in slot b) of the swap that brings the two
  // slots' module-k tokens closest to even (a gives x, the heavier, and takes
  // y); (n, n) when no swap lightens a. Slots of more than 4096 pairs: a's
  // largest and b's smallest.
  std::pair<std::size_t, std::size_t> balancing_pair(std::span<const sample_meta> batch,
                                                     std::size_t a, std::size_t b, std::size_t k) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t ab = slot_begin(a, n), ae = slot_begin(a + 1, n);
    const std::size_t bb = slot_begin(b, n), be = slot_begin(b + 1, n);
    const auto t = [&](std::size_t x) {
      return static_cast<double>(batch[plan_.seq[x]].tokens[k]);
    };
    const double half = (static_cast<double>(slot_tokens_[a * K + k]) -
                         static_cast<double>(slot_tokens_[b * K + k])) /
                        2;
    std::pair<std::size_t, std::size_t> best{n, n};
    if ((ae - ab) * (be - bb) > 4096) {
      std::size_t x = ab, y = bb;
      for (std::size_t i = ab + 1; i < ae; ++i)
        if (t(i) > t(x)) x = i;
      for (std::size_t i = bb + 1; i < be; ++i)
        if (t(i) < t(y)) y = i;
      if (t(x) > t(y)) best = {x, y};
      return best;
    }
    double gap = std::numeric_limits<double>::infinity();
    for (std::size_t x = ab; x < ae; ++x)
      for (std::size_t y = bb; y < be; ++y) {
        const double d = t(x) - t(y);
        if (d <= 0.0) continue;
        if (std::abs(d - half) < gap) {
          gap = std::abs(d - half);
          best = {x, y};
        }
      }
    return best;
  }

  // A candidate cut's slot times without splitting: every cell at its lower
  // bound max(slot total / dp, largest sample). The cells themselves are not
  // written (split_cells does that for the winner). Under token limits, a
  // slot holding more tokens than dp x max_tokens marks the cut infeasible.
  void estimate_cells(std::span<const sample_meta> batch) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    plan_.slowest.resize(K * m);
    plan_.bad.assign(m, detail::cell_failure{});
    plan_.bad_slots = 0;
    for (std::size_t j = 0; j < m; ++j) {
      std::array<double, max_reorder_modules> sum{}, largest{};
      std::array<std::uint64_t, max_reorder_modules> tokens{};
      for (std::size_t x = slot_begin(j, n); x < slot_begin(j + 1, n); ++x)
        for (std::size_t k = 0; k < K; ++k) {
          const double c = batch[plan_.seq[x]].cost[k];
          sum[k] += c;
          largest[k] = std::max(largest[k], c);
          if (limited_) tokens[k] += batch[plan_.seq[x]].tokens[k];
        }
      for (std::size_t k = 0; k < K; ++k) {
        plan_.slowest[k * m + j] =
            std::max(sum[k] / static_cast<double>(options_.modules[k].dp), largest[k]);
        // Under a token limit, a slot with more tokens than its cells hold
        // cannot be split: the candidate is infeasible as cut.
        const std::uint64_t cap = slot_token_capacity(k);
        if (cap != 0 && plan_.bad[j].sample == 0 && tokens[k] > cap) {
          plan_.bad[j] =
              detail::cell_failure{plan_.seq[slot_begin(j, n)] + 1, static_cast<std::uint32_t>(k)};
          ++plan_.bad_slots;
        }
      }
    }
  }

  // Step 2: plan_.seq = input indices grouped by slot (slot j = plan_.seq[slot_begin(j) ..)).
  void form_slots(std::span<const sample_meta> batch, start how, std::size_t module = 0) {
    plan_.seq.resize(batch.size());
    cutter_.cut(options_, batch, ranking_, detail::slot_cut{how, module}, plan_.seq);
  }

  // Max load of module k's replicas in slot j (one partition of the slot).
  double slot_time(std::span<const sample_meta> batch, std::size_t j, std::size_t k) {
    const std::size_t n = batch.size();
    const std::size_t b = slot_begin(j, n), e = slot_begin(j + 1, n);
    if (e - b <= options_.modules[k].dp) {  // one sample per replica at most: the largest decides
      double mx = 0.0;
      for (std::size_t x = b; x < e; ++x) mx = std::max(mx, batch[plan_.seq[x]].cost[k]);
      return mx;
    }
    costs_.resize(e - b);
    bins_.resize(e - b);
    for (std::size_t x = b; x < e; ++x) costs_[x - b] = batch[plan_.seq[x]].cost[k];
    // Scored with LPT (cheap); the final split uses the configured method.
    return partitioner_.partition(costs_, options_.modules[k].dp, options_.equal_count,
                                  balance_method::lpt, bins_, cell_ranking(j, k));
  }

  using potential_t = std::pair<double, double>;  // (max_k imbalance_k, sum_k imbalance_k)
  static bool lower(const potential_t& x, const potential_t& y) noexcept {
    return x.first < y.first * (1 - 1e-12) ||
           (x.first <= y.first && x.second < y.second * (1 - 1e-12));
  }

  // Work units of splitting the largest slot of a batch of n samples in
  // every module, s (1 + log2 s) + d per module (the slot and cut searches'
  // budgets count in these units).
  [[nodiscard]] std::size_t split_units(std::size_t n) const noexcept {
    const std::size_t m = options_.microbatches;
    const std::size_t s_max = (n + m - 1) / m;
    const std::size_t lg = static_cast<std::size_t>(std::bit_width(s_max)) + 1;
    std::size_t unit = 0;
    for (const reorder_module& mod : options_.modules) unit += s_max * lg + mod.dp;
    return unit;
  }
  // A search's work budget: max(2^floor_log2, 4 n log2 n) units.
  [[nodiscard]] static std::size_t work_budget(std::size_t n, int floor_log2) noexcept {
    return std::max<std::size_t>(std::size_t{1} << floor_log2,
                                 4 * n * static_cast<std::size_t>(std::bit_width(n)));
  }

  // Step 2b (small cells only, where slot membership decides the balance):
  // from each of several starting cuts, swap samples between slots while that
  // lowers the potential (max_k imbalance_k, then sum_k imbalance_k); keep the
  // best cut. Budgeted: slot_search_budget swaps tried per start.
  void choose_slots(std::span<const sample_meta> batch, start first) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    bool small = false;
    for (std::size_t k = 0; k < K; ++k)
      small = small ||
              n / m < static_cast<std::size_t>(options_.slot_search_below) * options_.modules[k].dp;
    if (options_.slot_search_budget == 0 || m < 2 || !small || first == start::arrival ||
        options_.balance == balance_method::none || options_.balance == balance_method::arrival) {
      form_slots(batch, first);
      return;
    }
    // Starts: the policy's cut, the other of size-sorted / balanced, ranks dealt
    // round-robin, id order, and sorted by each module's own cost (K > 1).
    starts_.clear();
    starts_.push_back({first, 0});
    starts_.push_back({first == start::size_sorted ? start::balanced : start::size_sorted, 0});
    starts_.push_back({start::dealt, 0});
    starts_.push_back({start::by_id, 0});
    for (std::size_t k = 0; K > 1 && k < K; ++k) starts_.push_back({start::by_module, k});
    // Budget: at most slot_search_budget swaps and W = max(2^16, 4 n log2 n)
    // work units, where splitting a slot of s samples over d replicas costs
    // s (1 + log2 s) + d units; a start costs K m splits, a swap 2 K. When that
    // leaves fewer than 16 swaps the search is skipped (large batches: the
    // slot cut alone is kept).
    const std::size_t unit = split_units(n);
    const std::size_t per_swap = 2 * unit, per_start = m * unit;
    const std::size_t work = work_budget(n, 16);
    // As many starts as leave 16 swaps each, at least one.
    starts_.resize(std::clamp<std::size_t>(work / (per_start + 16 * per_swap), 1, starts_.size()));
    const std::size_t left =
        work > starts_.size() * per_start ? work - starts_.size() * per_start : 0;
    const std::size_t swaps = std::min<std::size_t>(options_.slot_search_budget, left / per_swap);
    if (swaps < 16) {
      form_slots(batch, first);
      return;
    }
    const auto per_start_swaps = static_cast<std::uint32_t>(swaps / starts_.size());
    potential_t best{0.0, 0.0};
    for (std::size_t si = 0; si < starts_.size(); ++si) {
      form_slots(batch, starts_[si].first, starts_[si].second);
      const potential_t p = search_slots(batch, per_start_swaps);
      if (si == 0 || lower(p, best)) {
        best = p;
        best_seq_.assign(plan_.seq.begin(), plan_.seq.end());
      }
    }
    plan_.seq.assign(best_seq_.begin(), best_seq_.end());
  }

  potential_t search_slots(std::span<const sample_meta> batch, std::uint32_t budget) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    slot_time_.resize(K * m);
    std::array<double, max_reorder_modules> sum{}, ideal{};
    for (std::size_t k = 0; k < K; ++k) {
      ideal[k] = ranking_.total(k) / static_cast<double>(options_.modules[k].dp);
      for (std::size_t j = 0; j < m; ++j) sum[k] += slot_time_[k * m + j] = slot_time(batch, j, k);
    }
    const auto potential = [&](const std::array<double, max_reorder_modules>& s) {
      double worst = 0.0, all = 0.0;
      for (std::size_t k = 0; k < K; ++k) {
        const double imb = ideal[k] > 0.0 ? s[k] / ideal[k] : 1.0;
        worst = std::max(worst, imb);
        all += imb;
      }
      return potential_t{worst, all};
    };
    std::uint32_t tried = 0;
    std::array<double, 2 * max_reorder_modules> fresh{};
    potential_t cur = potential(sum);
    while (tried < budget) {
      std::size_t kw = 0;  // module with the worst imbalance
      for (std::size_t k = 1; k < K; ++k)
        if (ideal[k] > 0.0 && (ideal[kw] <= 0.0 || sum[k] / ideal[k] > sum[kw] / ideal[kw])) kw = k;
      // Slots by excess of module kw's slowest replica over its slot mean, largest first.
      excess_.resize(m);
      for (std::size_t j = 0; j < m; ++j) {
        double tot = 0.0;
        for (std::size_t x = slot_begin(j, n); x < slot_begin(j + 1, n); ++x)
          tot += batch[plan_.seq[x]].cost[kw];
        excess_[j] = slot_time_[kw * m + j] - tot / static_cast<double>(options_.modules[kw].dp);
      }
      order_slots_by_excess(m);
      bool improved = false;
      for (std::size_t ai = 0; ai < m && !improved && tried < budget; ++ai) {
        const std::size_t a = slot_order_[ai];
        for (std::size_t b = 0; b < m && !improved && tried < budget; ++b) {
          if (b == a) continue;
          for (std::size_t xa = slot_begin(a, n); xa < slot_begin(a + 1, n) && !improved; ++xa) {
            for (std::size_t yb = slot_begin(b, n); yb < slot_begin(b + 1, n); ++yb) {
              if (tried >= budget) break;
              if (batch[plan_.seq[yb]].cost == batch[plan_.seq[xa]].cost) continue;  // a no-op swap
              std::swap(plan_.seq[xa], plan_.seq[yb]);
              ++tried;
              std::array<double, max_reorder_modules> next = sum;
              for (std::size_t k = 0; k < K; ++k) {
                fresh[2 * k] = slot_time(batch, a, k);
                fresh[2 * k + 1] = slot_time(batch, b, k);
                next[k] +=
                    fresh[2 * k] + fresh[2 * k + 1] - slot_time_[k * m + a] - slot_time_[k * m + b];
              }
              const potential_t p = potential(next);
              if (lower(p, cur)) {
                for (std::size_t k = 0; k < K; ++k) {
                  slot_time_[k * m + a] = fresh[2 * k];
                  slot_time_[k * m + b] = fresh[2 * k + 1];
                  // Re-sum in slot order so the value does not drift.
                  sum[k] = 0.0;
                  for (std::size_t j = 0; j < m; ++j) sum[k] += slot_time_[k * m + j];
                }
                cur = potential(sum);
                improved = true;
                break;
              }
              std::swap(plan_.seq[xa], plan_.seq[yb]);
            }
          }
        }
      }
      if (!improved) break;
    }
    return cur;
  }

  // `best` compares its two cuts with KK on cells of at most these many
  // replicas and samples (the winner then gets KK on every cell).
  static constexpr std::uint32_t screen_kk_max_bins = 16, screen_kk_max_items = 64;
  // best / objective estimate large cells' candidates (estimate_cells) from
  // this many samples per replica.
  static constexpr std::uint32_t estimate_per_replica = 8;

  // slot_order_ = the m slots by excess_, largest first (ties: the lower slot first).
  void order_slots_by_excess(std::size_t m) {
    slot_order_.resize(m);
    for (std::size_t j = 0; j < m; ++j) slot_order_[j] = static_cast<std::uint32_t>(j);
    std::sort(slot_order_.begin(), slot_order_.end(), [this](std::uint32_t x, std::uint32_t y) {
      return excess_[x] > excess_[y] || (excess_[x] == excess_[y] && x < y);
    });
  }

  // Exchanges the plan that write_result reads (steps 3-4) with the saved one.
  void swap_plan() noexcept { std::swap(plan_, saved_); }

  // Step 3: plan_.replica/plan_.offset per (input index, module); load_ per (module, slot, replica).
  void split_cells(std::span<const sample_meta> batch, balance_method balance) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    plan_.replica.resize(n * K);
    plan_.offset.resize(n * K);
    load_base_.resize(K + 1);
    load_base_[0] = 0;
    for (std::size_t k = 0; k < K; ++k)
      load_base_[k + 1] = load_base_[k] + m * options_.modules[k].dp;
    plan_.slot_load.assign(load_base_[K], 0.0);
    plan_.slowest.assign(K * m, 0.0);
    plan_.slot.resize(n);
    plan_.bad.assign(m, detail::cell_failure{});
    plan_.bad_slots = 0;
    for (std::size_t j = 0; j < m; ++j) split_slot(batch, j, balance);
  }

  // Step 3 for slot j: every module's split of the slot's members.
  void split_slot(std::span<const sample_meta> batch, std::size_t j, balance_method balance) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t b = slot_begin(j, n), e = slot_begin(j + 1, n);
    // balance_method::arrival: the slot's members in arrival (input) order.
    if (balance == balance_method::arrival)
      std::sort(plan_.seq.begin() + static_cast<std::ptrdiff_t>(b),
                plan_.seq.begin() + static_cast<std::ptrdiff_t>(e));
    const std::span<const std::uint32_t> members(plan_.seq.data() + b, e - b);
    for (std::uint32_t i : members) plan_.slot[i] = static_cast<std::uint32_t>(j);
    costs_.resize(members.size());
    bins_.resize(members.size());
    if (plan_.bad[j].sample != 0) {
      plan_.bad[j] = detail::cell_failure{};
      --plan_.bad_slots;
    }
    for (std::size_t k = 0; k < K; ++k) {
      const std::uint32_t dp = options_.modules[k].dp;
      for (std::size_t x = 0; x < members.size(); ++x) costs_[x] = batch[members[x]].cost[k];
      const std::span<std::uint32_t> ranked = cell_ranking(j, k);
      partitioner_.partition(costs_, dp, options_.equal_count, balance, bins_, ranked);
      // The cell's ranking, kept for the later passes over the same cell
      // (slot_time, improve_cells) while the slot's members stay as they are.
      const std::span<const std::uint32_t> found = partitioner_.ranking();
      if (found.size() == ranked.size()) std::copy(found.begin(), found.end(), ranked.begin());
      const std::size_t failed = keep_limits(batch, members, k);
      if (failed != detail::limited_split::npos && plan_.bad[j].sample == 0) {
        plan_.bad[j] = detail::cell_failure{members[failed] + 1, static_cast<std::uint32_t>(k)};
        ++plan_.bad_slots;
      }
      write_cell(members, j, k);
    }
  }

  // Module k's cell of slot j in plan_.ranking: the ranking of the slot's
  // members by module k's cost that the last split of the cell found (a hint:
  // the partitioner checks it, so a stale one costs only the check).
  [[nodiscard]] std::span<std::uint32_t> cell_ranking(std::size_t j, std::size_t k) noexcept {
    const std::size_t K = options_.modules.size();
    const std::size_t n = plan_.ranking.size() / K;  // n x K entries: cell (j, k) at b K + k size
    const std::size_t b = slot_begin(j, n), size = slot_begin(j + 1, n) - b;
    return {plan_.ranking.data() + b * K + k * size, size};
  }

  // Module k's split in bins_ (costs_ = the members' costs) made to keep the
  // module's per-replica limits: unchanged when it does, else re-split by
  // limited_split. Returns npos, or the member no replica had room for.
  std::size_t keep_limits(std::span<const sample_meta> batch,
                          std::span<const std::uint32_t> members, std::size_t k) {
    const reorder_module& mod = options_.modules[k];
    if (!mod.limited()) return detail::limited_split::npos;
    tokens_.resize(members.size());
    for (std::size_t x = 0; x < members.size(); ++x) tokens_[x] = batch[members[x]].tokens[k];
    const detail::replica_limits lim{mod.max_samples, mod.max_tokens, options_.equal_count};
    if (limiter_.fits(tokens_, mod.dp, lim, bins_)) return detail::limited_split::npos;
    return limiter_.fit(costs_, tokens_, mod.dp, lim, bins_);
  }

  // The winner of `best` (screened): the KK and MULTIFIT steps the screening
  // left out on every cell (partitioner::improve on the cell's LPT + local
  // search split = what `refined` gives), then the order again if a cell
  // changed.
  void improve_cells(std::span<const sample_meta> batch) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    bool changed = false;
    for (std::size_t j = 0; j < m; ++j) {
      const std::size_t b = slot_begin(j, n), e = slot_begin(j + 1, n);
      const std::span<const std::uint32_t> members(plan_.seq.data() + b, e - b);
      for (std::size_t k = 0; k < K; ++k) {
        const std::uint32_t dp = options_.modules[k].dp;
        if (dp <= 1) continue;
        costs_.resize(members.size());
        bins_.resize(members.size());
        for (std::size_t x = 0; x < members.size(); ++x) {
          costs_[x] = batch[members[x]].cost[k];
          bins_[x] = plan_.replica[members[x] * K + k];
        }
        partitioner_.improve(costs_, dp, options_.equal_count, bins_, cell_ranking(j, k));
        if (keep_limits(batch, members, k) != detail::limited_split::npos)
          continue;  // KK's split cannot be made to fit: the cell stays as it was
        const double before = plan_.slowest[k * m + j];
        write_cell(members, j, k);
        changed = changed || plan_.slowest[k * m + j] != before;
      }
    }
    if (changed) order_slots(options_.order, true);
  }

  // Module k's split of slot j from bins_ (costs_ = the members' costs):
  // plan_.replica/plan_.offset of the members, the cells' loads, the slot's slowest.
  void write_cell(std::span<const std::uint32_t> members, std::size_t j, std::size_t k) {
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    const std::uint32_t dp = options_.modules[k].dp;
    fill_.assign(dp, 0);
    double* load = plan_.slot_load.data() + load_base_[k] + j * dp;
    std::fill(load, load + dp, 0.0);
    for (std::size_t x = 0; x < members.size(); ++x) {
      const std::uint32_t i = members[x];
      const std::uint32_t r = bins_[x];
      plan_.replica[i * K + k] = r;
      plan_.offset[i * K + k] = fill_[r]++;
      load[r] += costs_[x];
    }
    plan_.slowest[k * m + j] = *std::max_element(load, load + dp);
  }

  // Stage times of slowest (K x m) into fwd_/bwd_, row p = slot rows[p].
  void stage_times(std::span<const double> slowest, std::span<const std::uint32_t> rows) {
    const std::size_t m = options_.microbatches;
    const std::size_t S = options_.stages.size();
    fwd_.resize(m * S);
    bwd_.resize(m * S);
    for (std::size_t p = 0; p < m; ++p) {
      const std::size_t j = rows.empty() ? p : rows[p];
      for (std::size_t s = 0; s < S; ++s) {
        const pipeline_stage& st = options_.stages[s];
        const double t = slowest[st.module * m + j];
        fwd_[p * S + s] = st.forward_scale * t;
        bwd_[p * S + s] = st.backward_scale * t;
      }
    }
  }

  // Step 4: plan_.perm[position] = slot. from_current (search only): the search
  // starts from the current plan_.perm (never worse than it) instead of slot order.
  void order_slots(order_method method, bool from_current) {
    const std::size_t m = options_.microbatches;
    const std::size_t S = options_.stages.size();
    const bool seeded = from_current && method == order_method::search;
    stage_times(plan_.slowest, seeded ? std::span<const std::uint32_t>(plan_.perm)
                                      : std::span<const std::uint32_t>());
    plan_.position.resize(m);
    if (seeded) {
      order_tmp_.resize(m);
      plan_.time =
          orderer_.order(microbatch_times{m, S, fwd_, bwd_}, objective_, method, order_tmp_);
      for (std::size_t p = 0; p < m; ++p) plan_.position[p] = plan_.perm[order_tmp_[p]];
      std::copy(plan_.position.begin(), plan_.position.end(), plan_.perm.begin());
    } else {
      plan_.perm.resize(m);
      plan_.time =
          orderer_.order(microbatch_times{m, S, fwd_, bwd_}, objective_, method, plan_.perm);
    }
    for (std::size_t p = 0; p < m; ++p)
      plan_.position[plan_.perm[p]] = static_cast<std::uint32_t>(p);
    if (plan_.bad_slots != 0) plan_.time = infeasible_;
  }

  // The objective of the current plan_.perm (search) or of the method's order of
  // the slots, for slot times `slowest` (K x m).
  double score_slots(std::span<const double> slowest) {
    const std::size_t m = options_.microbatches;
    const std::size_t S = options_.stages.size();
    const bool fixed = options_.order == order_method::search;
    stage_times(slowest, fixed ? std::span<const std::uint32_t>(plan_.perm)
                               : std::span<const std::uint32_t>());
    order_tmp_.resize(m);
    return orderer_.order(microbatch_times{m, S, fwd_, bwd_}, objective_,
                          fixed ? order_method::identity : options_.order, order_tmp_);
  }

  // Copies the primary plan into the saved buffers (capacity reserved: no allocation).
  void copy_plan() { saved_.copy_from(plan_); }

  // Step 2c (best / objective): slot swaps scored by the objective. From the
  // heaviest slot a (stage-time sum) to the lightest b, swap a's largest or
  // second largest sample (cost key) with b's smallest. A swap is screened
  // with LPT splits of slots a and b (before and after, the other slots at
  // their current times, the current order); one that passes is split as
  // configured and kept only if the objective of the current order drops.
  // First improvement, restarted after each kept swap; at most
  // cut_search_budget swaps tried and W = max(2^18, 4 n log2 n) work units
  // (as the slot search: a slot's LPT split over d replicas costs
  // s (1 + log2 s) + d); skipped when W allows fewer than 16. At the end the
  // order search starts again from the current order.
  void search_cut(std::span<const sample_meta> batch) {
    const std::size_t n = batch.size();
    const std::size_t K = options_.modules.size();
    const std::size_t m = options_.microbatches;
    // none / arrival split a slot by its members' order: a baseline, not searched.
    if (options_.cut_search_budget == 0 || m < 2 || options_.balance == balance_method::none ||
        options_.balance == balance_method::arrival)
      return;
    const std::size_t unit = split_units(n);
    const std::size_t per_try = 2 * unit, setup = m * unit;
    const std::size_t work = work_budget(n, 18);
    if (work < setup + 16 * per_try) return;
    const std::size_t tries =
        std::min<std::size_t>(options_.cut_search_budget, (work - setup) / per_try);
    // LPT screen of every slot, and the slots' stage-time sums.
    lpt_.resize(K * m);
    for (std::size_t k = 0; k < K; ++k)
      for (std::size_t j = 0; j < m; ++j) lpt_[k * m + j] = slot_time(batch, j, k);
    trial_.resize(K * m);
    excess_.resize(m);
    std::size_t tried = 0;
    bool any = false;
    while (tried < tries) {
      for (std::size_t j = 0; j < m; ++j) {
        double w = 0.0;
        for (const pipeline_stage& st : options_.stages)
          w += (st.forward_scale + st.backward_scale) * plan_.slowest[st.module * m + j];
        excess_[j] = w;
      }
      order_slots_by_excess(m);
      bool improved = false;
      for (std::size_t ai = 0; ai < m && !improved && tried < tries; ++ai) {
        const std::size_t a = slot_order_[ai];
        for (std::size_t bi = m; bi-- > ai + 1 && !improved && tried < tries;) {
          const std::size_t b = slot_order_[bi];
          // Reference: slots a and b at their LPT screens, the rest as split.
          std::copy(plan_.slowest.begin(), plan_.slowest.end(), trial_.begin());
          for (std::size_t k = 0; k < K; ++k) {
            trial_[k * m + a] = lpt_[k * m + a];
            trial_[k * m + b] = lpt_[k * m + b];
          }
          const double reference = score_slots(trial_);
          // a's two largest members by key, b's smallest (ties: lower id).
          const std::size_t ab = slot_begin(a, n), ae = slot_begin(a + 1, n);
          const std::size_t bb = slot_begin(b, n), be = slot_begin(b + 1, n);
          const auto larger = [&](std::size_t x, std::size_t y) {  // plan_.seq positions
            return ranking_.ranks_before(batch, plan_.seq[x], plan_.seq[y]);
          };
          std::size_t x1 = ab, x2 = ae, y = bb;
          for (std::size_t x = ab + 1; x < ae; ++x) {
            if (larger(x, x1)) {
              x2 = x1;
              x1 = x;
            } else if (x2 == ae || larger(x, x2)) {
              x2 = x;
            }
          }
          for (std::size_t x = bb + 1; x < be; ++x)
            if (larger(y, x)) y = x;
          for (const std::size_t xa : {x1, x2}) {
            if (xa == ae || improved || tried >= tries) continue;
            if (!larger(xa, y)) continue;  // swapping would not lighten a
            ++tried;
            std::swap(plan_.seq[xa], plan_.seq[y]);
            std::array<double, 2 * max_reorder_modules> fresh{};
            for (std::size_t k = 0; k < K; ++k) {
              fresh[2 * k] = trial_[k * m + a] = slot_time(batch, a, k);
              fresh[2 * k + 1] = trial_[k * m + b] = slot_time(batch, b, k);
            }
            if (!better(score_slots(trial_), reference)) {
              std::swap(plan_.seq[xa], plan_.seq[y]);
              continue;
            }
            split_slot(batch, a, options_.balance);
            split_slot(batch, b, options_.balance);
            const double t = plan_.bad_slots != 0 ? infeasible_ : score_slots(plan_.slowest);
            if (better(t, plan_.time)) {
              plan_.time = t;
              for (std::size_t k = 0; k < K; ++k) {
                lpt_[k * m + a] = fresh[2 * k];
                lpt_[k * m + b] = fresh[2 * k + 1];
              }
              improved = any = true;
              continue;
            }
            std::swap(plan_.seq[xa], plan_.seq[y]);
            split_slot(batch, a, options_.balance);  // the slots' cells as they were
            split_slot(batch, b, options_.balance);
          }
        }
      }
      if (!improved) break;
    }
    if (any) order_slots(options_.order, true);
  }

  reorder_options options_;
  Objective objective_;
  bool limited_ = false;  // some module has a per-replica limit
  partitioner partitioner_;
  detail::slot_cutter cutter_;  // step 2
  detail::limited_split limiter_;
  std::vector<std::uint32_t> tokens_;
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
