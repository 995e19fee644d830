#pragma once
/// @file partition.hpp
/// @brief Balanced number partitioning: split items with costs into `k` bins
/// so the heaviest bin is as light as possible (LPT, Karmarkar-Karp, and the
/// refined default), optionally with equal item counts per bin.
///
/// This is the inner step of intra-microbatch balancing: the samples of one
/// microbatch slot are split over one module's DP replicas.
///
/// Methods (see docs/reorder.md for the bounds):
/// - `none`: items in the given order, contiguous chunks of near-equal count.
///   The reorderer hands a slot's samples in rank order (cost key descending),
///   so there `none` gives *cost-sorted chunks*, not a no-reordering baseline;
/// - `arrival`: the same chunks of the given order; the reorderer hands a
///   slot's samples in arrival (input) order, so there it is the true "no
///   balancing" baseline (what a data loader without reordering does);
/// - `lpt`: longest processing time first: items by descending cost, each to
///   the currently lightest bin (DistTrain's rule; max load < 4/3 of optimal);
/// - `karmarkar_karp`: k-way largest differencing (the method verl uses),
///   with sparse states (only non-empty parts are stored): O(n log n + n k)
///   time at worst and O(n + k) memory;
/// - `refined` (default): LPT and KK, each followed by local search (moves and pairwise swaps between the heaviest bin and the
///   lightest ones while that lowers the heavier of the two); the better result
///   wins; problems of at most `exact_max_items` items finish with a budgeted
///   branch and bound seeded by that result. Never worse than LPT or KK.
///
/// Tie rule: items are ranked by (cost descending, index ascending), bins by
/// (load, bin index); the result depends only on the cost sequence.
///
/// @snippet reorder.cpp partition

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/reorder/detail/radix_sort.hpp"

namespace disttrain {

/// @brief How the samples of a slot are split over a module's DP replicas.
/// @snippet reorder.cpp balance_method
enum class balance_method : std::uint8_t {
  none,            ///< given order, contiguous chunks (reorderer: cost-sorted chunks)
  lpt,             ///< longest processing time first (DistTrain)
  karmarkar_karp,  ///< k-way largest differencing (verl)
  refined,         ///< LPT / KK + local search (default)
  arrival,         ///< given order, contiguous chunks (reorderer: arrival order; the baseline)
};

/// @brief Most bins `partitioner::partition` accepts (and most DP replicas of a
/// reorder module): 2^20.
inline constexpr std::uint32_t max_partition_bins = 1u << 20;

/// @brief Name of a balance method ("none", "lpt", "karmarkar_karp", "refined", "arrival").
constexpr std::string_view to_string(balance_method m) noexcept {
  switch (m) {
    case balance_method::none: return "none";
    case balance_method::lpt: return "lpt";
    case balance_method::karmarkar_karp: return "karmarkar_karp";
    case balance_method::refined: return "refined";
    case balance_method::arrival: return "arrival";
  }
  return "unknown";
}

/// @brief Splits items into bins; owns its scratch buffers so repeated calls
/// do not allocate once the buffers have grown to the largest problem seen.
///
/// Not thread-safe: use one partitioner per thread.
/// @snippet reorder.cpp partitioner
class partitioner {
 public:
  /// Local search stops after this many improving steps per call times (items + bins).
  std::uint32_t refine_steps_per_item = 1;
  /// Local search takes a step only if it lowers the heavier bin by more than this fraction.
  double refine_min_gain = 1e-6;
  /// Local search compares the heaviest bin with at most this many of the lightest bins.
  std::uint32_t refine_width = 8;
  /// `refined` also runs KK (and keeps the better) when bins <= this ...
  /// (default: always, so `refined` is never worse than plain KK; KK costs
  /// O(n log n + n k) time and O(n + k) memory)
  std::uint32_t refine_kk_max_bins = std::numeric_limits<std::uint32_t>::max();
  /// ... and items <= this (default: always) ...
  std::uint32_t refine_kk_max_items = std::numeric_limits<std::uint32_t>::max();
  /// ... unless LPT + local search is already within this fraction of the
  /// lower bound max(mean load, largest item), which KK cannot beat (0: KK
  /// always runs, and `refined` is never worse than KK at all).
  double refine_kk_skip_gap = 0.0;
  /// `refined` finishes small problems (items <= exact_max_items, bins <=
  /// exact_max_bins) with a branch-and-bound search seeded by the heuristic result ...
  std::uint32_t exact_max_items = 24;
  /// ... (bins limit of the branch and bound) ...
  std::uint32_t exact_max_bins = 16;
  /// ... that visits at most this many search nodes (exact when it completes).
  std::uint32_t exact_node_budget = 50000;

  /// @brief Assigns every item to a bin; returns the largest bin load.
  ///
  /// @param costs        item costs, finite and >= 0, with a finite sum
  /// @param bins         number of bins, 1..max_partition_bins
  /// @param equal_count  every bin gets floor(n/k) or ceil(n/k) items
  /// @param method       algorithm
  /// @param bin_of       output, one entry per item
  /// Throws `errc::invalid_argument` at `bins` for zero or more than
  /// `max_partition_bins` bins, at `bin_of` for a size mismatch, at `costs[i]`
  /// for a negative or non-finite cost, at `costs` when their sum overflows;
  /// `errc::infeasible` at `bins` when `equal_count` and there are fewer items than bins.
  double partition(std::span<const double> costs, std::uint32_t bins, bool equal_count,
                   balance_method method, std::span<std::uint32_t> bin_of) {
    require(bins > 0, "bins", "number of bins must be > 0, got ", bins);
    require(bins <= max_partition_bins, "bins", "number of bins ", bins, " exceeds the limit ",
            max_partition_bins);
    require(bin_of.size() == costs.size(), "bin_of", "output has ", bin_of.size(),
            " entries, need ", costs.size());
    if (equal_count && costs.size() < bins) {
      fail(errc::infeasible, "bins", "equal_count needs at least one item per bin: ", costs.size(),
           " items for ", bins, " bins");
    }
    const std::size_t n = costs.size();
    if (n == 0) return 0.0;
    const double total = check_costs(costs);
    reserve(n, bins, method);
    costs_ = costs;
    k_ = bins;
    equal_ = equal_count;
    if (method == balance_method::none || method == balance_method::arrival) {
      chunk(bin_of);
      return max_load(bin_of);
    }
    sort_items();
    if (method == balance_method::lpt) {
      lpt(bin_of);
      return max_load(bin_of);
    }
    if (method == balance_method::karmarkar_karp) {
      karmarkar_karp(bin_of);
      return max_load(bin_of);
    }
    // refined
    lpt(bin_of);
    double best = refine(bin_of);
    if (k_ <= refine_kk_max_bins && n <= refine_kk_max_items) best = try_kk(bin_of, best, total);
    if (n <= exact_max_items && k_ > 1 && k_ <= exact_max_bins) best = exact(bin_of, best);
    return best;
  }

  /// @brief `refined`'s KK step on an existing assignment `bin_of` (e.g. one
  /// found with KK disabled): runs KK (unless `bin_of` is within
  /// refine_kk_skip_gap of the lower bound) and keeps it, with local search
  /// when KK alone is better, if that lowers the max load: the KK step
  /// `refined` applies after LPT + local search. Returns the
  /// max load. Errors as `partition`, plus `invalid_argument` at `bin_of[i]`
  /// for a bin out of range.
  double improve_with_kk(std::span<const double> costs, std::uint32_t bins, bool equal_count,
                         std::span<std::uint32_t> bin_of) {
    require(bins > 0 && bins <= max_partition_bins, "bins", "number of bins must be in [1, ",
            max_partition_bins, "], got ", bins);
    require(bin_of.size() == costs.size(), "bin_of", "output has ", bin_of.size(),
            " entries, need ", costs.size());
    for (std::size_t i = 0; i < bin_of.size(); ++i)
      if (bin_of[i] >= bins)
        fail(errc::invalid_argument, cat("bin_of[", i, "]"), "bin ", bin_of[i], " >= bins ", bins);
    const std::size_t n = costs.size();
    if (n == 0) return 0.0;
    const double total = check_costs(costs);
    reserve(n, bins, balance_method::karmarkar_karp);
    costs_ = costs;
    k_ = bins;
    equal_ = equal_count;
    sort_items();
    return try_kk(bin_of, max_load(bin_of), total);
  }

 private:
  static constexpr std::uint32_t nil = std::numeric_limits<std::uint32_t>::max();

  // `refined`'s KK step: KK cannot beat max(mean, largest item), so it is
  // skipped once `best` is within refine_kk_skip_gap of that bound; otherwise
  // KK runs and replaces bin_of when better. Small problems always refine
  // KK's result; larger ones only when KK alone already beats `best`
  // (refining costs about as much as KK). Returns the max load.
  double try_kk(std::span<std::uint32_t> bin_of, double best, double total) {
    const std::size_t n = costs_.size();
    if (k_ <= 1) return best;
    const double lower = std::max(total / static_cast<double>(k_), costs_[order_[0]]);
    if (!(best > lower * (1 + refine_kk_skip_gap))) return best;
    alt_.resize(n);
    karmarkar_karp(alt_);
    const bool small = k_ <= 16 && n <= 64;
    double kk = small ? refine(alt_) : max_load(alt_);
    if (!small && kk < best) kk = refine(alt_);
    if (kk < best) {
      best = kk;
      std::copy(alt_.begin(), alt_.end(), bin_of.begin());
    }
    return best;
  }

  // Every cost finite and >= 0 (NaN fails both tests), their sum finite: then
  // every bin load is finite too.
  static double check_costs(std::span<const double> costs) {
    constexpr double top = std::numeric_limits<double>::max();
    double total = 0.0;
    for (std::size_t i = 0; i < costs.size(); ++i) {
      const double c = costs[i];
      if (!(c >= 0.0 && c <= top))
        fail(errc::invalid_argument, cat("costs[", i, "]"), "cost must be finite and >= 0, got ",
             c);
      total += c;
    }
    if (!(total <= top))
      fail(errc::invalid_argument, "costs", "the sum of the ", costs.size(),
           " costs overflows (exceeds ", top, ")");
    return total;
  }

  // Grows every buffer any path may use for (n, k), so that a later call of at
  // most this size allocates nothing, whichever path it takes.
  void reserve(std::size_t n, std::size_t k, balance_method method) {
    for (auto* v : {&order_, &next_, &kk_heap_, &alt_, &path_, &best_path_, &flat_})
      if (v->capacity() < n + 1) v->reserve(n + 1);
    if (count_.capacity() < k) count_.reserve(k);
    const std::size_t cand =
        k <= exact_max_bins ? k * (std::min<std::size_t>(n, exact_max_items) + 1) : k;
    if (cand_.capacity() < cand) cand_.reserve(cand);
    if (start_.capacity() < k + 1) start_.reserve(k + 1);
    if (load_.capacity() < k) load_.reserve(k);
    const std::size_t leaves = std::bit_ceil(k);
    if (tree_key_.capacity() < 2 * leaves) tree_key_.reserve(2 * leaves);
    if (tree_bin_.capacity() < 2 * leaves) tree_bin_.reserve(2 * leaves);
    if (by_load_.capacity() < k) by_load_.reserve(k);
    if (keyed_.capacity() < n) keyed_.reserve(n);
    if (n >= radix_min_items && keyed_tmp_.capacity() < n) keyed_tmp_.reserve(n);
    const bool kk =
        method == balance_method::karmarkar_karp ||
        (method == balance_method::refined && k <= refine_kk_max_bins && n <= refine_kk_max_items);
    if (kk) {  // O(n) in all: nodes, states, merge scratch; the pool 2 x 4n ids
      if (kk_node_.capacity() < n) kk_node_.reserve(n);
      for (auto* v : {&kk_size_, &kk_cap_, &kk_new_})
        if (v->capacity() < n) v->reserve(n);
      if (kk_off_.capacity() < n) kk_off_.reserve(n);
      for (auto* v : {&kk_pool_, &kk_spare_})
        if (v->capacity() < 4 * n) v->reserve(4 * n);
      if (kk_spread_.capacity() < n) kk_spread_.reserve(n);
    }
  }

  static constexpr std::size_t radix_min_items = 128;  // below: std::sort is faster

  // A non-empty part of a KK state: its sum, item count and item list
  // (head .. tail through next_).
  struct kk_node {
    double sum;
    std::uint32_t count, head, tail;
  };

  double max_load(std::span<const std::uint32_t> bin_of) {
    load_.assign(k_, 0.0);
    // Summed in item index order, so the value depends only on the input.
    for (std::size_t i = 0; i < costs_.size(); ++i) load_[bin_of[i]] += costs_[i];
    return *std::max_element(load_.begin(), load_.end());
  }

  [[nodiscard]] std::uint32_t capacity_of(std::uint32_t i) const noexcept {
    const std::uint32_t n = static_cast<std::uint32_t>(costs_.size());
    return n / k_ + (i < n % k_ ? 1u : 0u);
  }

  void chunk(std::span<std::uint32_t> bin_of) const {
    std::uint32_t b = 0, used = 0;
    for (std::size_t i = 0; i < costs_.size(); ++i) {
      while (used == capacity_of(b)) {
        ++b;
        used = 0;
      }
      bin_of[i] = b;
      ++used;
    }
  }

  // order_ = items by (cost descending, index ascending). Already ordered
  // input (the reorderer hands slots in rank order) is detected in O(n); large
  // inputs use a stable radix sort, small ones a comparison sort: both give
  // this unique order.
  void sort_items() {
    const std::size_t n = costs_.size();
    order_.resize(n);
    for (std::size_t i = 0; i < n; ++i) order_[i] = static_cast<std::uint32_t>(i);
    bool sorted = true;
    for (std::size_t i = 1; i < n && sorted; ++i) sorted = !(costs_[i - 1] < costs_[i]);
    if (sorted) return;
    keyed_.resize(n);
    for (std::size_t i = 0; i < n; ++i)
      keyed_[i] =
          detail::radix_item{detail::descending_key(costs_[i]), static_cast<std::uint32_t>(i)};
    if (n >= radix_min_items) {
      keyed_tmp_.resize(n);
      detail::radix_sort(keyed_, keyed_tmp_);
    } else {
      std::sort(keyed_.begin(), keyed_.end(),
                [](const detail::radix_item& x, const detail::radix_item& y) {
                  return x.key < y.key || (x.key == y.key && x.index < y.index);
                });
    }
    for (std::size_t i = 0; i < n; ++i) order_[i] = keyed_[i].index;
  }

  // LPT keeps the bins in a winner tree (a tournament over the bins: node i
  // holds the best of nodes 2i and 2i+1), ordered by (key, bin) where key is
  // the bin's load as an ordered integer, or `closed` for a full bin
  // (equal-count mode) and the padding leaves. The root is the lightest open
  // bin, ties to the lower index: the bin a binary heap on (load, bin) would
  // give, at log2(k) branch-free comparisons per item.
  static constexpr std::uint64_t closed = std::numeric_limits<std::uint64_t>::max();

  void tree_set(std::size_t leaf, std::uint64_t key) noexcept {
    std::size_t i = tree_size_ + leaf;
    tree_key_[i] = key;
    for (i /= 2; i >= 1; i /= 2) {
      const std::size_t l = 2 * i, r = l + 1;
      const bool right = tree_key_[r] < tree_key_[l] ||
                         (tree_key_[r] == tree_key_[l] && tree_bin_[r] < tree_bin_[l]);
      const std::size_t w = right ? r : l;
      tree_key_[i] = tree_key_[w];
      tree_bin_[i] = tree_bin_[w];
    }
  }

  void lpt(std::span<std::uint32_t> bin_of) {
    const std::uint32_t n = static_cast<std::uint32_t>(costs_.size());
    const std::uint32_t q = n / k_, rem = n % k_;
    count_.assign(k_, 0);
    load_.assign(k_, 0.0);
    tree_size_ = std::bit_ceil(static_cast<std::size_t>(k_));
    tree_key_.assign(2 * tree_size_, closed);
    tree_bin_.resize(2 * tree_size_);
    for (std::size_t leaf = 0; leaf < tree_size_; ++leaf) {
      tree_bin_[tree_size_ + leaf] = static_cast<std::uint32_t>(leaf);
      if (leaf < k_) tree_key_[tree_size_ + leaf] = detail::ascending_key(0.0);
    }
    for (std::size_t i = tree_size_; i-- > 1;) {  // equal keys: the left (lower) bin wins
      const std::size_t w = tree_key_[2 * i + 1] < tree_key_[2 * i] ? 2 * i + 1 : 2 * i;
      tree_key_[i] = tree_key_[w];
      tree_bin_[i] = tree_bin_[w];
    }
    std::uint32_t big = 0;  // bins already holding q + 1 items (equal-count mode)
    for (std::uint32_t item : order_) {
      // Close bins that became full (equal-count mode) as they reach the root.
      while (equal_ && count_[tree_bin_[1]] >= (big < rem ? q + 1 : q))
        tree_set(tree_bin_[1], closed);
      const std::uint32_t b = tree_bin_[1];
      bin_of[item] = b;
      load_[b] += costs_[item];
      if (++count_[b] == q + 1 && equal_) ++big;
      tree_set(b, detail::ascending_key(load_[b]));
    }
  }

  // k-way largest differencing. A state is k parts sorted by (sum desc,
  // count asc, first item asc); its spread is largest - smallest sum. The two
  // states of largest spread (ties: lower state id) are merged, part i of the
  // first with part k-1-i of the second, until one state remains; part i of
  // it is bin i.
  //
  // States are stored sparsely: only their non-empty parts (nodes: one per
  // item at the start; two summed parts keep one node), the k - p empty parts
  // implied at the end, as a sorted segment of node ids in kk_pool_. Merging
  // p parts with q: the first min(p, k-q) parts of one and the first
  // min(q, k-p) of the other stay alone, the last p + q - k of each are summed
  // in pairs. The longer lone run stays in place in its segment; the other
  // run and the sums (at most 2 min(p, q) parts) are sorted and inserted into
  // it from the back (binary search + block moves). A segment that must grow
  // moves to the pool's end with twice the room (at most k); a full pool is
  // compacted. Singletons (the non-equal start) wait in rank order, which is
  // their (spread desc, id asc) order, so the heap holds merged states only.
  // Time O(n log n + n k) at worst (the block moves; the sums are bounded by
  // n in all since each removes a node), memory O(n): nodes, the pool (4n
  // ids, two buffers), per-state offsets.
  [[nodiscard]] bool part_before(std::uint32_t x, std::uint32_t y) const noexcept {
    const kk_node& a = kk_node_[x];
    const kk_node& b = kk_node_[y];
    if (a.sum != b.sum) return a.sum > b.sum;
    if (a.count != b.count) return a.count < b.count;
    return a.head < b.head;
  }

  // Spread of a state: its largest part minus its smallest (0 while empty parts remain).
  [[nodiscard]] double kk_spread(std::size_t off, std::size_t size) const noexcept {
    return kk_node_[kk_pool_[off]].sum -
           (size == k_ ? kk_node_[kk_pool_[off + size - 1]].sum : 0.0);
  }

  // Copies every live state (the heap, the waiting singletons, and a, b)
  // tightly into the other buffer and swaps the buffers.
  void kk_compact(std::uint32_t a, std::uint32_t b, std::size_t single, std::size_t singles) {
    std::size_t w = 0;
    const auto move_state = [&](std::uint32_t s) {
      std::copy_n(kk_pool_.begin() + static_cast<std::ptrdiff_t>(kk_off_[s]), kk_size_[s],
                  kk_spare_.begin() + static_cast<std::ptrdiff_t>(w));
      kk_off_[s] = w;
      kk_cap_[s] = kk_size_[s];
      w += kk_size_[s];
    };
    for (const std::uint32_t s : kk_heap_) move_state(s);
    for (std::size_t s = single; s < singles; ++s) move_state(static_cast<std::uint32_t>(s));
    move_state(a);
    move_state(b);
    kk_pool_.swap(kk_spare_);
    kk_used_ = w;
  }

  void karmarkar_karp(std::span<std::uint32_t> bin_of) {
    const std::size_t n = costs_.size();
    const std::size_t k = k_;
    next_.assign(n, nil);
    kk_node_.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint32_t item = order_[r];
      kk_node_[r] = kk_node{costs_[item], 1, item, item};
    }
    if (kk_pool_.size() < 4 * n) kk_pool_.resize(4 * n);
    if (kk_spare_.size() < 4 * n) kk_spare_.resize(4 * n);
    for (std::size_t r = 0; r < n; ++r) kk_pool_[r] = static_cast<std::uint32_t>(r);
    kk_used_ = n;
    // Initial states: one item each, or (equal count) k consecutive ranked
    // items (already in part order: ranked by cost desc, index asc).
    const std::size_t states = equal_ ? (n + k - 1) / k : n;
    kk_off_.resize(states);
    kk_size_.resize(states);
    kk_cap_.resize(states);
    kk_spread_.resize(states);
    for (std::size_t s = 0; s < states; ++s) {
      const std::size_t b = equal_ ? s * k : s;
      const std::size_t e = equal_ ? std::min(n, b + k) : s + 1;
      kk_off_[s] = b;
      kk_size_[s] = kk_cap_[s] = static_cast<std::uint32_t>(e - b);
      kk_spread_[s] = kk_spread(b, e - b);
    }
    const auto better = [this](std::uint32_t x, std::uint32_t y) {  // larger spread, lower id
      return kk_spread_[x] > kk_spread_[y] || (kk_spread_[x] == kk_spread_[y] && x < y);
    };
    const auto heap_less = [&better](std::uint32_t x, std::uint32_t y) { return better(y, x); };
    // Non-equal: singletons wait in [single, singles); equal count: all in the heap.
    std::size_t single = 0;
    const std::size_t singles = equal_ ? 0 : states;
    kk_heap_.clear();
    if (equal_) {
      for (std::size_t s = 0; s < states; ++s) kk_heap_.push_back(static_cast<std::uint32_t>(s));
      std::make_heap(kk_heap_.begin(), kk_heap_.end(), heap_less);
    }
    const auto pop = [&]() -> std::uint32_t {
      if (single < singles &&
          (kk_heap_.empty() || better(static_cast<std::uint32_t>(single), kk_heap_.front())))
        return static_cast<std::uint32_t>(single++);
      std::pop_heap(kk_heap_.begin(), kk_heap_.end(), heap_less);
      const std::uint32_t x = kk_heap_.back();
      kk_heap_.pop_back();
      return x;
    };
    const auto before = [this](std::uint32_t x, std::uint32_t y) { return part_before(x, y); };
    for (std::size_t live = states; live > 1; --live) {
      const std::uint32_t a = pop();
      const std::uint32_t b = pop();
      const std::size_t p = kk_size_[a], q = kk_size_[b];
      const std::size_t a_only = std::min(p, k - q), b_only = std::min(q, k - p);
      const std::size_t r = std::min(k, p + q);
      const bool keep_a = a_only >= b_only;
      const std::uint32_t t = keep_a ? a : b;  // the state whose lone run stays in place
      const std::size_t kept = keep_a ? a_only : b_only;
      if (r > kk_cap_[t]) {  // the segment must grow: make room at the pool's end first
        const std::size_t cap = std::min(k, 2 * r);
        if (kk_used_ + cap > kk_pool_.size()) kk_compact(a, b, single, singles);
      }
      const std::uint32_t* A = kk_pool_.data() + kk_off_[a];
      const std::uint32_t* B = kk_pool_.data() + kk_off_[b];
      kk_new_.clear();
      for (std::size_t i = k - q; i < p; ++i) {  // sums: part i of a with part k-1-i of b
        kk_node& x = kk_node_[A[i]];
        const kk_node& y = kk_node_[B[k - 1 - i]];
        x.sum += y.sum;
        x.count += y.count;
        next_[x.tail] = y.head;
        x.tail = y.tail;
        kk_new_.push_back(A[i]);
      }
      if (keep_a)
        kk_new_.insert(kk_new_.end(), B, B + b_only);
      else
        kk_new_.insert(kk_new_.end(), A, A + a_only);
      std::sort(kk_new_.begin(), kk_new_.end(), before);
      std::uint32_t* seg = kk_pool_.data() + kk_off_[t];
      if (r > kk_cap_[t]) {  // move: merge the kept run and the new parts into a new segment
        const std::size_t cap = std::min(k, 2 * r);
        std::uint32_t* out = kk_pool_.data() + kk_used_;
        std::merge(seg, seg + kept, kk_new_.begin(), kk_new_.end(), out, before);
        kk_off_[t] = kk_used_;
        kk_cap_[t] = static_cast<std::uint32_t>(cap);
        kk_used_ += cap;
      } else {  // in place, from the back: each new part after the kept parts that precede it
        std::size_t i = kept, w = r;
        for (std::size_t j = kk_new_.size(); j-- > 0;) {
          const std::uint32_t x = kk_new_[j];
          const std::size_t pos = static_cast<std::size_t>(
              std::partition_point(seg, seg + i, [&](std::uint32_t e) { return before(e, x); }) -
              seg);
          std::copy_backward(seg + pos, seg + i, seg + w);
          w -= i - pos;
          seg[--w] = x;
          i = pos;
        }
      }
      kk_off_[a] = kk_off_[t];
      kk_cap_[a] = kk_cap_[t];
      kk_size_[a] = static_cast<std::uint32_t>(r);
      kk_spread_[a] = kk_spread(kk_off_[a], r);
      kk_heap_.push_back(a);
      std::push_heap(kk_heap_.begin(), kk_heap_.end(), heap_less);
    }
    const std::uint32_t root =
        kk_heap_.empty() ? static_cast<std::uint32_t>(single) : kk_heap_.front();
    for (std::size_t i = 0; i < kk_size_[root]; ++i)
      for (std::uint32_t item = kk_node_[kk_pool_[kk_off_[root] + i]].head; item != nil;
           item = next_[item])
        bin_of[item] = static_cast<std::uint32_t>(i);
  }

  // Local search on an assignment; returns its max load. Each bin keeps its
  // items sorted by (cost ascending, index descending), so the best partner of
  // an item is found by binary search.
  double refine(std::span<std::uint32_t> bin_of) {
    const std::size_t n = costs_.size();
    if (k_ == 1) return max_load(bin_of);
    // Items grouped by bin in flat_ (bin b = flat_[start_[b] .. start_[b+1])),
    // each group in before() order: a counting sort of the ascending ranking.
    load_.assign(k_, 0.0);
    start_.assign(k_ + 1, 0);
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      ++start_[bin_of[i] + 1];
      load_[bin_of[i]] += costs_[i];
      total += costs_[i];
    }
    // Nothing beats max(mean load, largest item): stop once there (at once
    // when the start is there already, e.g. one item per bin: no O(k log k)
    // sort of the bins).
    const double lower = std::max(total / static_cast<double>(k_), costs_[order_[0]]);
    const double start_max = *std::max_element(load_.begin(), load_.end());
    if (start_max <= lower * (1 + 1e-9)) return start_max;
    for (std::uint32_t b = 0; b < k_; ++b) start_[b + 1] += start_[b];
    flat_.resize(n);
    count_.assign(k_, 0);
    for (std::size_t r = n; r-- > 0;) {
      const std::uint32_t item = order_[r];
      const std::uint32_t b = bin_of[item];
      flat_[start_[b] + count_[b]++] = item;
    }
    // Bins by (load, index) ascending, kept sorted across steps (a step
    // changes two loads): the heaviest bin and the lightest candidates are read
    // off its ends instead of being searched for.
    const auto lighter = [this](std::uint32_t x, std::uint32_t y) {
      return load_[x] < load_[y] || (load_[x] == load_[y] && x < y);
    };
    by_load_.resize(k_);
    for (std::uint32_t b = 0; b < k_; ++b) by_load_[b] = b;
    std::sort(by_load_.begin(), by_load_.end(), lighter);
    cand_.resize(k_);
    const std::size_t max_steps = static_cast<std::size_t>(refine_steps_per_item) * (n + k_);
    const std::size_t width = std::min<std::size_t>(refine_width, k_ - 1);
    const auto cost_below = [this](std::uint32_t item, double v) { return costs_[item] < v; };
    for (std::size_t step = 0; step < max_steps; ++step) {
      // Heaviest: the lowest index among the bins of maximal load.
      std::size_t top = k_ - 1;
      while (top > 0 && load_[by_load_[top - 1]] == load_[by_load_[k_ - 1]]) --top;
      const std::uint32_t a = by_load_[top];
      const double la = load_[a];
      if (la <= lower * (1 + 1e-9)) break;
      const double tol = la * refine_min_gain;
      // Candidates: the `width` lightest other bins, lightest first.
      for (std::size_t x = 0, c = 0; c < width; ++x)
        if (x != top) cand_[c++] = by_load_[x];
      bool improved = false;
      for (std::size_t ci = 0; ci < width && !improved; ++ci) {
        const std::uint32_t b = cand_[ci];
        const double lb = load_[b];
        const double gap = la - lb;
        if (gap <= tol) break;
        double best = la - tol;
        std::uint32_t bx = nil, by = nil;
        const std::span<const std::uint32_t> A(flat_.data() + start_[a], start_[a + 1] - start_[a]);
        const std::span<const std::uint32_t> B(flat_.data() + start_[b], start_[b + 1] - start_[b]);
        const auto consider = [&](std::uint32_t x, std::uint32_t y, double d) {
          if (d > tol && d < gap) {
            const double nm = std::max(la - d, lb + d);
            if (nm < best) {
              best = nm;
              bx = x;
              by = y;
            }
          }
        };
        if (!equal_) {  // move the item of `a` closest to gap / 2
          const auto it = std::lower_bound(A.begin(), A.end(), gap / 2, cost_below);
          if (it != A.end()) consider(*it, nil, costs_[*it]);
          if (it != A.begin()) consider(*(it - 1), nil, costs_[*(it - 1)]);
        }
        for (std::uint32_t x : A) {  // swap x with the item of `b` closest to cost(x) - gap / 2
          const double cx = costs_[x];
          const auto it = std::lower_bound(B.begin(), B.end(), cx - gap / 2, cost_below);
          if (it != B.end()) consider(x, *it, cx - costs_[*it]);
          if (it != B.begin()) consider(x, *(it - 1), cx - costs_[*(it - 1)]);
        }
        if (bx != nil) {
          move(bx, a, b, bin_of);
          if (by != nil) move(by, b, a, bin_of);
          resort_bins(a, b);
          improved = true;
        }
      }
      if (!improved) break;
    }
    return *std::max_element(load_.begin(), load_.end());
  }

  // Restores by_load_'s order after the loads of bins a and b changed: both
  // are taken out, then put back at their places (O(k) moves, k = bins).
  void resort_bins(std::uint32_t a, std::uint32_t b) {
    const auto lighter = [this](std::uint32_t x, std::uint32_t y) {
      return load_[x] < load_[y] || (load_[x] == load_[y] && x < y);
    };
    by_load_.erase(std::remove_if(by_load_.begin(), by_load_.end(),
                                  [a, b](std::uint32_t x) { return x == a || x == b; }),
                   by_load_.end());
    for (const std::uint32_t x : {a, b})
      by_load_.insert(std::lower_bound(by_load_.begin(), by_load_.end(), x, lighter), x);
  }

  // Branch and bound over assignments in ranked order, seeded with the
  // incumbent `best`; stops at the lower bound max(largest item, total / k) or
  // after exact_node_budget nodes. Returns the (possibly improved) max load.
  double exact(std::span<std::uint32_t> bin_of, double best) {
    const std::size_t n = costs_.size();
    double total = 0.0;
    for (std::size_t i = 0; i < n; ++i) total += costs_[i];
    const double lower = std::max(costs_[order_[0]], total / static_cast<double>(k_));
    const double tol = best * 1e-12;
    if (best <= lower + tol) return best;
    load_.assign(k_, 0.0);
    count_.assign(k_, 0);
    path_.assign(n, 0);
    cand_.resize(static_cast<std::size_t>(k_) * n);
    nodes_ = 0;
    best_ = best;
    found_ = false;
    lower_ = lower;
    branch(0, 0.0, 0);
    if (found_) {
      for (std::size_t d = 0; d < n; ++d) bin_of[order_[d]] = best_path_[d];
    }
    return best_;
  }

  void branch(std::size_t depth, double cur_max, std::uint32_t big) {
    const std::size_t n = costs_.size();
    if (++nodes_ > exact_node_budget || best_ <= lower_ + best_ * 1e-12) return;
    if (depth == n) {
      best_ = cur_max;
      best_path_.assign(path_.begin(), path_.end());
      found_ = true;
      return;
    }
    const std::uint32_t q = static_cast<std::uint32_t>(n / k_),
                        rem = static_cast<std::uint32_t>(n % k_);
    const double c = costs_[order_[depth]];
    // Candidate bins, lightest first; bins with equal (load, count) are interchangeable.
    std::uint32_t* cand = cand_.data() + depth * k_;
    std::uint32_t nc = 0;
    for (std::uint32_t b = 0; b < k_; ++b) {
      if (equal_ && (count_[b] > q || (count_[b] == q && big >= rem))) continue;
      bool twin = false;
      for (std::uint32_t x = 0; x < nc && !twin; ++x)
        twin = load_[cand[x]] == load_[b] && count_[cand[x]] == count_[b];
      if (!twin) cand[nc++] = b;
    }
    std::sort(cand, cand + nc, [this](std::uint32_t x, std::uint32_t y) {
      return load_[x] < load_[y] || (load_[x] == load_[y] && x < y);
    });
    for (std::uint32_t x = 0; x < nc; ++x) {
      const std::uint32_t b = cand[x];
      const double nl = load_[b] + c;
      if (nl >= best_ - best_ * 1e-12) break;  // later candidates are heavier still
      load_[b] = nl;
      ++count_[b];
      path_[depth] = b;
      branch(depth + 1, std::max(cur_max, nl), big + (equal_ && count_[b] == q + 1 ? 1u : 0u));
      --count_[b];
      load_[b] -= c;
      if (nodes_ > exact_node_budget || best_ <= lower_ + best_ * 1e-12) return;
    }
  }

  // Bin order: cost ascending, then index descending (the reverse of the ranking).
  [[nodiscard]] bool before(std::uint32_t x, std::uint32_t y) const noexcept {
    return costs_[x] < costs_[y] || (costs_[x] == costs_[y] && x > y);
  }
  // Moves `item` between bins in flat_, shifting the items in between: O(n).
  void move(std::uint32_t item, std::uint32_t from, std::uint32_t to,
            std::span<std::uint32_t> bin_of) {
    const auto cmp = [this](std::uint32_t x, std::uint32_t y) { return before(x, y); };
    const auto base = flat_.begin();
    const auto pos = std::lower_bound(base + start_[from], base + start_[from + 1], item, cmp);
    const auto ins = std::lower_bound(base + start_[to], base + start_[to + 1], item, cmp);
    if (from < to) {
      std::copy(pos + 1, ins, pos);
      *(ins - 1) = item;
      for (std::uint32_t b = from + 1; b <= to; ++b) --start_[b];
    } else {
      std::copy_backward(ins, pos, pos + 1);
      *ins = item;
      for (std::uint32_t b = to + 1; b <= from; ++b) ++start_[b];
    }
    load_[from] -= costs_[item];
    load_[to] += costs_[item];
    bin_of[item] = to;
  }

  std::span<const double> costs_;
  std::uint32_t k_ = 1;
  bool equal_ = false;
  std::vector<std::uint32_t> order_, count_, next_, cand_, kk_heap_, alt_, path_, best_path_;
  std::vector<std::uint32_t> flat_, start_;  // refine(): items grouped by bin, see before()
  std::size_t nodes_ = 0;
  double best_ = 0.0, lower_ = 0.0;
  bool found_ = false;
  std::vector<double> load_;
  std::vector<std::uint64_t> tree_key_;            // lpt(): winner tree keys
  std::vector<std::uint32_t> tree_bin_, by_load_;  // lpt(): winners; refine(): bins by load
  std::size_t tree_size_ = 1;                      // leaves of the winner tree
  std::vector<detail::radix_item> keyed_, keyed_tmp_;
  std::vector<kk_node> kk_node_;  // karmarkar_karp(): parts, one node per item
  std::vector<std::uint32_t> kk_pool_, kk_spare_, kk_size_, kk_cap_, kk_new_;
  std::vector<std::size_t> kk_off_;  // segment offsets in kk_pool_ (up to 4n)
  std::vector<double> kk_spread_;
  std::size_t kk_used_ = 0;
};

}  // namespace disttrain
