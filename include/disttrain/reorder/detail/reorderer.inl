#pragma once
/// @file reorderer.inl
/// @brief The bodies of `reorderer`'s steps (included at the end of
/// `reorder/reorderer.hpp`, which declares them and documents the algorithm).
/// In the order of the header's steps: the cut search (choose_cut and its
/// candidates, baselines, cut swaps), the slots (slot search, repair under
/// limits), the cells (split, improve, exact finish) and the order.

namespace disttrain {

// The chosen plan still has a cell no split could fit (every cut tried had
// one): names the first such slot's unplaced sample.
template <order_objective Objective>
auto reorderer<Objective>::fail_packing(std::span<const sample_meta> batch) const -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::choose_cut(std::span<const sample_meta> batch) -> void {
  search_candidates(batch);
  if (options_.balance == balance_method::refined) {
    copy_plan();  // the winner as searched, in case the improved cells score worse
    improve_cells(batch);
    if (!(plan_.time <= saved_.time)) swap_plan();
  }
  if (options_.slots == slot_policy::objective) compare_baselines(batch);
}

// Steps 1-2 of choose_cut, with `refined` screened: KK only on small cells,
// no MULTIFIT, no wide pass (the partitioner's settings, restored after).
template <order_objective Objective>
auto reorderer<Objective>::search_candidates(std::span<const sample_meta> batch) -> void {
  const std::size_t n = batch.size();
  const std::size_t m = options_.microbatches;
  const bool screen = options_.balance == balance_method::refined;
  const std::uint32_t kk_bins = partitioner_.refine_kk_max_bins,
                      kk_items = partitioner_.refine_kk_max_items;
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
  // Large cells (slots of more than screen_kk_max_items samples and at
  // least estimate_per_replica samples per replica in every module): the
  // candidates are compared with every cell at its lower bound
  // max(slot total / dp, largest sample) (O(n K), no split; the refined
  // split is within ~0.5 % of it there) and only the winner is split.
  bool estimate = screen && n / m > screen_kk_max_items;
  for (const reorder_module& mod : options_.modules)
    estimate = estimate && n / m >= std::size_t{estimate_per_replica} * mod.dp;
  screen_cuts(batch, estimate, guard.budget);
  // Under per-replica limits, a winner chosen at its lower bounds may not
  // pack: then every candidate is split (and repaired) and compared again.
  if (estimate && plan_.bad_slots != 0) screen_cuts(batch, false, guard.budget);
  order_slots(options_.order, true);  // the full order search, from the current order
  search_cut(batch);
}

// Step 1: every candidate cut planned (at its cells' lower bounds when
// `at_bounds`) and ordered by the order search's seeds alone (the full
// search, `order_budget`, runs once, on the winner); the winner ends in the
// primary buffers, split.
template <order_objective Objective>
auto reorderer<Objective>::screen_cuts(std::span<const sample_meta> batch, bool at_bounds, std::uint32_t order_budget) -> void {
  static constexpr std::array<start, 5> candidates{
      start::arrival, start::balanced, start::size_sorted, start::dealt, start::by_id};
  orderer_.budget = 0;
  bool first = true;
  // The arrival cut is a candidate only where candidates are split: its
  // uneven slots look better at their lower bounds than they split, and
  // step 4 plans it in full anyway.
  const bool by_objective = options_.slots == slot_policy::objective;
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
  orderer_.budget = order_budget;
  if (at_bounds) {  // the winner's cells
    split_cells(batch, options_.balance);
    if (plan_.bad_slots != 0) repair_cut(batch, options_.balance);
  }
}

// Step 4 (objective): the searched cut in the primary buffers against the
// arrival cut split and ordered as configured and against no reordering
// at all. The baselines replace the searched cut when lower by any amount,
// so the result is never above either, not even by a rounding difference.
template <order_objective Objective>
auto reorderer<Objective>::compare_baselines(std::span<const sample_meta> batch) -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::arrival_cannot_win(std::span<const sample_meta> batch) -> bool {
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

// Grows every buffer any path may use for a batch of n samples, so a later
// batch of at most n samples allocates nothing, whichever path it takes.
template <order_objective Objective>
auto reorderer<Objective>::reserve(std::size_t n) -> void {
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
    grow(unfit_, n);
    grow(slot_tokens_, m * K);
    limiter_.reserve(n, dp_max);
  }
  grow(fwd_, m * S);
  grow(bwd_, m * S);
  grow(starts_, 4 + K);
}

template <order_objective Objective>
auto reorderer<Objective>::plan(std::span<const sample_meta> batch, start first, balance_method balance, order_method order, bool slot_search, bool estimate) -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::repair_cut(std::span<const sample_meta> batch, balance_method balance) -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::slot_token_capacity(std::size_t k) const noexcept -> std::uint64_t {
  const std::uint64_t limit = options_.modules[k].max_tokens, dp = options_.modules[k].dp;
  return limit > std::numeric_limits<std::uint64_t>::max() / dp
             ? std::numeric_limits<std::uint64_t>::max()
             : limit * dp;
}

// Positions (x in slot a, y in slot b) of the swap that brings the two
// slots' module-k tokens closest to even (a gives x, the heavier, and takes
// y); (n, n) when no swap lightens a. Slots of more than 4096 pairs: a's
// largest and b's smallest.
template <order_objective Objective>
auto reorderer<Objective>::balancing_pair(std::span<const sample_meta> batch, std::size_t a, std::size_t b, std::size_t k) -> std::pair<std::size_t, std::size_t> {
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
template <order_objective Objective>
auto reorderer<Objective>::estimate_cells(std::span<const sample_meta> batch) -> void {
  const std::size_t n = batch.size();
  const std::size_t K = options_.modules.size();
  const std::size_t m = options_.microbatches;
  plan_.slowest.resize(K * m);
  plan_.bad.assign(m, detail::cell_failure{});
  plan_.bad_slots = 0;
  plan_.refined = false;  // no cell is split
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

// Max load of module k's replicas in slot j (one partition of the slot).
template <order_objective Objective>
auto reorderer<Objective>::slot_time(std::span<const sample_meta> batch, std::size_t j, std::size_t k) -> double {
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

// Work units of splitting the largest slot of a batch of n samples in
// every module, s (1 + log2 s) + d per module (the slot and cut searches'
// budgets count in these units).
template <order_objective Objective>
auto reorderer<Objective>::split_units(std::size_t n) const noexcept -> std::size_t {
  const std::size_t m = options_.microbatches;
  const std::size_t s_max = (n + m - 1) / m;
  const std::size_t lg = static_cast<std::size_t>(std::bit_width(s_max)) + 1;
  std::size_t unit = 0;
  for (const reorder_module& mod : options_.modules) unit += s_max * lg + mod.dp;
  return unit;
}

// Step 2b (small cells only, where slot membership decides the balance):
// from each of several starting cuts, swap samples between slots while that
// lowers the potential (max_k imbalance_k, then sum_k imbalance_k); keep the
// best cut. Budgeted: slot_search_budget swaps tried per start.
template <order_objective Objective>
auto reorderer<Objective>::choose_slots(std::span<const sample_meta> batch, start first) -> void {
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

// Step 2's slot search from the current cut: first-improvement swaps of two
// samples of different slots that lower the slots' balance potential (LPT
// slot times), at most `budget` swaps tried; returns the potential reached.
template <order_objective Objective>
auto reorderer<Objective>::search_slots(std::span<const sample_meta> batch, std::uint32_t budget) -> potential_t {
  const std::size_t K = options_.modules.size();
  const std::size_t m = options_.microbatches;
  slot_time_.resize(K * m);
  slot_balance bal;
  bal.modules = K;
  for (std::size_t k = 0; k < K; ++k) {
    bal.ideal[k] = ranking_.total(k) / static_cast<double>(options_.modules[k].dp);
    for (std::size_t j = 0; j < m; ++j)
      bal.sum[k] += slot_time_[k * m + j] = slot_time(batch, j, k);
  }
  swap_budget tries{0, budget};
  potential_t cur = bal.potential(bal.sum);
  while (!tries.spent()) {
    rank_slots_by_excess(batch, bal.worst());
    if (!improve_slots(batch, bal, cur, tries)) break;
  }
  return cur;
}

// slot_order_ = the slots by the excess of module kw's slowest replica over
// its slot mean, largest first.
template <order_objective Objective>
auto reorderer<Objective>::rank_slots_by_excess(std::span<const sample_meta> batch, std::size_t kw) -> void {
  const std::size_t n = batch.size();
  const std::size_t m = options_.microbatches;
  excess_.resize(m);
  for (std::size_t j = 0; j < m; ++j) {
    double tot = 0.0;
    for (std::size_t x = slot_begin(j, n); x < slot_begin(j + 1, n); ++x)
      tot += batch[plan_.seq[x]].cost[kw];
    excess_[j] = slot_time_[kw * m + j] - tot / static_cast<double>(options_.modules[kw].dp);
  }
  order_slots_by_excess(m);
}

// One pass of the slot search: the first swap (slot a by excess, then
// every other slot b, every member pair) that lowers the potential is kept.
template <order_objective Objective>
auto reorderer<Objective>::improve_slots(std::span<const sample_meta> batch, slot_balance& bal, potential_t& cur, swap_budget& tries) -> bool {
  const std::size_t m = options_.microbatches;
  for (std::size_t ai = 0; ai < m && !tries.spent(); ++ai)
    for (std::size_t b = 0; b < m && !tries.spent(); ++b)
      if (b != slot_order_[ai] && swap_members(batch, {slot_order_[ai], b}, bal, cur, tries))
        return true;
  return false;
}

// The first swap of a member of slot a with one of slot b that lowers the
// potential, kept (slot times and sums updated); false if none within the budget.
template <order_objective Objective>
auto reorderer<Objective>::swap_members(std::span<const sample_meta> batch, slot_pair s, slot_balance& bal, potential_t& cur, swap_budget& tries) -> bool {
  const std::size_t n = batch.size();
  const std::size_t K = options_.modules.size();
  const std::size_t m = options_.microbatches;
  std::array<double, 2 * max_reorder_modules> fresh{};
  for (std::size_t xa = slot_begin(s.a, n); xa < slot_begin(s.a + 1, n); ++xa)
    for (std::size_t yb = slot_begin(s.b, n); yb < slot_begin(s.b + 1, n); ++yb) {
      if (tries.spent()) return false;
      if (batch[plan_.seq[yb]].cost == batch[plan_.seq[xa]].cost) continue;  // a no-op swap
      std::swap(plan_.seq[xa], plan_.seq[yb]);
      ++tries.tried;
      std::array<double, max_reorder_modules> next = bal.sum;
      for (std::size_t k = 0; k < K; ++k) {
        fresh[2 * k] = slot_time(batch, s.a, k);
        fresh[2 * k + 1] = slot_time(batch, s.b, k);
        next[k] +=
            fresh[2 * k] + fresh[2 * k + 1] - slot_time_[k * m + s.a] - slot_time_[k * m + s.b];
      }
      if (lower(bal.potential(next), cur)) {
        for (std::size_t k = 0; k < K; ++k) {
          slot_time_[k * m + s.a] = fresh[2 * k];
          slot_time_[k * m + s.b] = fresh[2 * k + 1];
          // Re-sum in slot order so the value does not drift.
          bal.sum[k] = 0.0;
          for (std::size_t j = 0; j < m; ++j) bal.sum[k] += slot_time_[k * m + j];
        }
        cur = bal.potential(bal.sum);
        return true;
      }
      std::swap(plan_.seq[xa], plan_.seq[yb]);
    }
  return false;
}

// slot_order_ = the m slots by excess_, largest first (ties: the lower slot first).
template <order_objective Objective>
auto reorderer<Objective>::order_slots_by_excess(std::size_t m) -> void {
  slot_order_.resize(m);
  for (std::size_t j = 0; j < m; ++j) slot_order_[j] = static_cast<std::uint32_t>(j);
  std::sort(slot_order_.begin(), slot_order_.end(), [this](std::uint32_t x, std::uint32_t y) {
    return excess_[x] > excess_[y] || (excess_[x] == excess_[y] && x < y);
  });
}

// Step 3: plan_.replica/plan_.offset per (input index, module); load_ per (module, slot, replica).
template <order_objective Objective>
auto reorderer<Objective>::split_cells(std::span<const sample_meta> batch, balance_method balance) -> void {
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
  plan_.refined = balance == balance_method::refined;
  for (std::size_t j = 0; j < m; ++j) split_slot(batch, j, balance);
}

// Step 3 for slot j: every module's split of the slot's members.
template <order_objective Objective>
auto reorderer<Objective>::split_slot(std::span<const sample_meta> batch, std::size_t j, balance_method balance) -> void {
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
    // refined: without its exact finish, which only the chosen plan gets
    // (finish_cells; keep_limits tries it on a split that breaks a limit).
    partitioner_.partition(costs_, dp, options_.equal_count, balance, bins_, ranked, 0);
    // The cell's ranking, kept for the later passes over the same cell
    // (slot_time, improve_cells) while the slot's members stay as they are.
    const std::span<const std::uint32_t> found = partitioner_.ranking();
    if (found.size() == ranked.size()) std::copy(found.begin(), found.end(), ranked.begin());
    const std::size_t failed = keep_limits(batch, members, k, balance);
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
template <order_objective Objective>
auto reorderer<Objective>::cell_ranking(std::size_t j, std::size_t k) noexcept -> std::span<std::uint32_t> {
  const std::size_t K = options_.modules.size();
  const std::size_t n = plan_.ranking.size() / K;  // n x K entries: cell (j, k) at b K + k size
  const std::size_t b = slot_begin(j, n), size = slot_begin(j + 1, n) - b;
  return {plan_.ranking.data() + b * K + k * size, size};
}

// Module k's split in bins_ (costs_ = the members' costs) made to keep the
// module's per-replica limits: unchanged when it does; else, for `refined`,
// its exact finish (which the candidates' splits leave out, finish_cells)
// on a small cell if that keeps them; else re-split by limited_split.
// Returns npos, or the member no replica had room for.
template <order_objective Objective>
auto reorderer<Objective>::keep_limits(std::span<const sample_meta> batch, std::span<const std::uint32_t> members, std::size_t k, balance_method balance) -> std::size_t {
  if (split_fits(batch, members, k)) return detail::limited_split::npos;
  const reorder_module& mod = options_.modules[k];
  if (balance == balance_method::refined && partitioner_.exact_applies(members.size(), mod.dp)) {
    unfit_.assign(bins_.begin(), bins_.end());  // the split as it was, if the finish does not fit
    (void)partitioner_.finish(costs_, mod.dp, options_.equal_count, bins_, {},
                              partitioner_.exact_node_budget);
    if (split_fits(batch, members, k)) return detail::limited_split::npos;
    std::copy(unfit_.begin(), unfit_.end(), bins_.begin());
  }
  return limiter_.fit(costs_, tokens_, mod.dp, limits_of(mod), bins_);
}

// Module k's split in bins_ keeps the module's per-replica limits (tokens_
// = the members' tokens afterwards when the module has limits).
template <order_objective Objective>
auto reorderer<Objective>::split_fits(std::span<const sample_meta> batch, std::span<const std::uint32_t> members, std::size_t k) -> bool {
  const reorder_module& mod = options_.modules[k];
  if (!mod.limited()) return true;
  tokens_.resize(members.size());
  for (std::size_t x = 0; x < members.size(); ++x) tokens_[x] = batch[members[x]].tokens[k];
  return limiter_.fits(tokens_, mod.dp, limits_of(mod), bins_);
}

// `refined`'s exact finish, on the chosen plan only (every candidate was
// split without it): the branch and bound on each small cell
// (partitioner::exact_applies), all together within exact_search_budget
// work units (a node of a cell of dp replicas costs dp: a node's work is
// linear in the bins): a cell gets an equal share of what the cells before
// it left, and at most exact_node_budget nodes. A split that breaks a limit
// is not taken. Then the order again if a cell changed, kept if not worse.
// So the time of a call is bounded whatever the slots' sizes.
template <order_objective Objective>
auto reorderer<Objective>::finish_cells(std::span<const sample_meta> batch) -> void {
  const std::size_t n = batch.size();
  const std::size_t K = options_.modules.size();
  const std::size_t m = options_.microbatches;
  const auto small = [&](std::size_t j, std::size_t k) {
    return partitioner_.exact_applies(slot_begin(j + 1, n) - slot_begin(j, n),
                                      options_.modules[k].dp);
  };
  std::uint64_t cells = 0, left = options_.exact_search_budget;
  for (std::size_t j = 0; j < m; ++j)
    for (std::size_t k = 0; k < K; ++k) cells += small(j, k) ? 1U : 0U;
  if (cells == 0 || left == 0) return;
  bool changed = false;
  copy_plan();  // the plan as chosen, in case the new order scores worse
  for (std::size_t j = 0; j < m; ++j) {
    const std::size_t b = slot_begin(j, n), e = slot_begin(j + 1, n);
    const std::span<const std::uint32_t> members(plan_.seq.data() + b, e - b);
    for (std::size_t k = 0; k < K; ++k) {
      if (!small(j, k)) continue;
      const std::uint32_t dp = options_.modules[k].dp;
      const auto nodes = static_cast<std::uint32_t>(
          std::min<std::uint64_t>(partitioner_.exact_node_budget, left / cells-- / dp));
      costs_.resize(members.size());
      bins_.resize(members.size());
      for (std::size_t x = 0; x < members.size(); ++x) {
        costs_[x] = batch[members[x]].cost[k];
        bins_[x] = plan_.replica[members[x] * K + k];
      }
      const double before = plan_.slowest[k * m + j];
      const auto done =
          partitioner_.finish(costs_, dp, options_.equal_count, bins_, cell_ranking(j, k), nodes);
      left -= done.nodes * dp;
      if (!(done.max_load < before) || !split_fits(batch, members, k)) continue;
      write_cell(members, j, k);
      changed = true;
    }
  }
  if (!changed) return;
  order_slots(options_.order, true);
  if (plan_.time <= saved_.time) return;
  // The order search scored above the plan as chosen (by a rounding
  // difference, where the finished cells are off the critical path): the
  // finished cells in the chosen order, scored the same way as it was.
  plan_.perm.assign(saved_.perm.begin(), saved_.perm.end());
  plan_.position.assign(saved_.position.begin(), saved_.position.end());
  plan_.time = score_current_order(plan_.slowest);
  if (!(plan_.time <= saved_.time)) swap_plan();
}

// The winner of `best` (screened): the KK and MULTIFIT steps the screening
// left out on every cell (partitioner::improve on the cell's LPT + local
// search split = what `refined` gives), then the order again if a cell
// changed.
template <order_objective Objective>
auto reorderer<Objective>::improve_cells(std::span<const sample_meta> batch) -> void {
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
      if (keep_limits(batch, members, k, balance_method::refined) != detail::limited_split::npos)
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
template <order_objective Objective>
auto reorderer<Objective>::write_cell(std::span<const std::uint32_t> members, std::size_t j, std::size_t k) -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::stage_times(std::span<const double> slowest, std::span<const std::uint32_t> rows) -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::order_slots(order_method method, bool from_current) -> void {
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
template <order_objective Objective>
auto reorderer<Objective>::score_slots(std::span<const double> slowest) -> double {
  if (options_.order == order_method::search) return score_current_order(slowest);
  const std::size_t m = options_.microbatches;
  const std::size_t S = options_.stages.size();
  stage_times(slowest, {});
  order_tmp_.resize(m);
  return orderer_.order(microbatch_times{m, S, fwd_, bwd_}, objective_, options_.order,
                        order_tmp_);
}

// The objective of plan_.perm (the current order) for slot times `slowest` (K x m).
template <order_objective Objective>
auto reorderer<Objective>::score_current_order(std::span<const double> slowest) -> double {
  const std::size_t m = options_.microbatches;
  const std::size_t S = options_.stages.size();
  stage_times(slowest, plan_.perm);
  order_tmp_.resize(m);
  return orderer_.order(microbatch_times{m, S, fwd_, bwd_}, objective_, order_method::identity,
                        order_tmp_);
}

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
template <order_objective Objective>
auto reorderer<Objective>::search_cut(std::span<const sample_meta> batch) -> void {
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
  swap_budget budget{0, tries};
  bool any = false;
  while (!budget.spent()) {
    rank_slots_by_stage_time();
    if (!improve_cut(batch, budget)) break;
    any = true;
  }
  if (any) order_slots(options_.order, true);
}

// slot_order_ = the slots by the sum of their stage times (forward and
// backward, the current split), heaviest first.
template <order_objective Objective>
auto reorderer<Objective>::rank_slots_by_stage_time() -> void {
  const std::size_t m = options_.microbatches;
  excess_.resize(m);
  for (std::size_t j = 0; j < m; ++j) {
    double w = 0.0;
    for (const pipeline_stage& st : options_.stages)
      w += (st.forward_scale + st.backward_scale) * plan_.slowest[st.module * m + j];
    excess_[j] = w;
  }
  order_slots_by_excess(m);
}

// One pass of the cut search: from the heaviest slot a to the lightest b,
// the first swap that is kept.
template <order_objective Objective>
auto reorderer<Objective>::improve_cut(std::span<const sample_meta> batch, swap_budget& budget) -> bool {
  const std::size_t m = options_.microbatches;
  for (std::size_t ai = 0; ai < m && !budget.spent(); ++ai)
    for (std::size_t bi = m; bi-- > ai + 1 && !budget.spent();)
      if (swap_across(batch, {slot_order_[ai], slot_order_[bi]}, budget)) return true;
  return false;
}

// Slots a (heavier) and b: a's largest or second largest member (cost key;
// ties: lower id) for b's smallest, each screened against both slots at
// their LPT screens with the rest as split (the reference); true when one is kept.
template <order_objective Objective>
auto reorderer<Objective>::swap_across(std::span<const sample_meta> batch, slot_pair s, swap_budget& budget) -> bool {
  const std::size_t n = batch.size();
  const std::size_t K = options_.modules.size();
  const std::size_t m = options_.microbatches;
  std::copy(plan_.slowest.begin(), plan_.slowest.end(), trial_.begin());
  for (std::size_t k = 0; k < K; ++k) {
    trial_[k * m + s.a] = lpt_[k * m + s.a];
    trial_[k * m + s.b] = lpt_[k * m + s.b];
  }
  const double reference = score_slots(trial_);
  const std::size_t ab = slot_begin(s.a, n), ae = slot_begin(s.a + 1, n);
  const std::size_t bb = slot_begin(s.b, n), be = slot_begin(s.b + 1, n);
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
    if (xa == ae || budget.spent()) continue;
    if (!larger(xa, y)) continue;  // swapping would not lighten a
    ++budget.tried;
    if (try_cut_swap(batch, {s, xa, y}, reference)) return true;
  }
  return false;
}

// Makes the swap `mv`. Kept when the slots' LPT screens beat `reference`
// and, split as configured, the objective of the current order drops; else undone.
template <order_objective Objective>
auto reorderer<Objective>::try_cut_swap(std::span<const sample_meta> batch, const cut_move& mv, double reference) -> bool {
  const std::size_t K = options_.modules.size();
  const std::size_t m = options_.microbatches;
  const slot_pair s = mv.slots;
  std::swap(plan_.seq[mv.from], plan_.seq[mv.to]);
  std::array<double, 2 * max_reorder_modules> fresh{};
  for (std::size_t k = 0; k < K; ++k) {
    fresh[2 * k] = trial_[k * m + s.a] = slot_time(batch, s.a, k);
    fresh[2 * k + 1] = trial_[k * m + s.b] = slot_time(batch, s.b, k);
  }
  if (!better(score_slots(trial_), reference)) {
    std::swap(plan_.seq[mv.from], plan_.seq[mv.to]);
    return false;
  }
  split_slot(batch, s.a, options_.balance);
  split_slot(batch, s.b, options_.balance);
  const double t = plan_.bad_slots != 0 ? infeasible_ : score_slots(plan_.slowest);
  if (better(t, plan_.time)) {
    plan_.time = t;
    for (std::size_t k = 0; k < K; ++k) {
      lpt_[k * m + s.a] = fresh[2 * k];
      lpt_[k * m + s.b] = fresh[2 * k + 1];
    }
    return true;
  }
  std::swap(plan_.seq[mv.from], plan_.seq[mv.to]);
  split_slot(batch, s.a, options_.balance);  // the slots' cells as they were
  split_slot(batch, s.b, options_.balance);
  return false;
}

}  // namespace disttrain
