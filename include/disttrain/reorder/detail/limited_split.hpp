#pragma once
/// @file limited_split.hpp
/// @brief Internal: splits the samples of one cell group (one microbatch slot,
/// one module) over the module's replicas so that no replica exceeds a sample
/// count or a token budget (`reorder_module::max_samples` / `max_tokens`).
///
/// The reorderer first splits a slot with its balance method; only a split
/// that breaks a limit comes here. `fit` then
/// 1. places items by descending cost, each on the least-loaded replica that
///    still has room (capacitated LPT); if an item finds no room,
/// 2. places items by descending tokens, each on the replica with the most
///    token room left (worst-fit decreasing: the packing-first order); if an
///    item still finds no room, the cell cannot be packed and `fit` returns it;
/// 3. improves the result by moves (and, with equal counts, swaps) from the
///    heaviest replica while they lower it and keep every limit (budgeted).
/// Deterministic: ties go to the lower item index and the lower replica.
/// Allocation-free once its scratch has grown to the largest cell.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

namespace disttrain::detail {

/// @brief Per-replica limits of one cell group.
struct replica_limits {
  std::uint32_t max_items = 0;   ///< most items per replica (0: none)
  std::uint64_t max_tokens = 0;  ///< most tokens per replica (0: none)
  bool equal_count = false;      ///< counts floor(n/k) or ceil(n/k) (reorder_options::equal_count)
  [[nodiscard]] bool any() const noexcept { return max_items != 0 || max_tokens != 0; }
};

/// @brief The capacitated split of the file comment.
class limited_split {
 public:
  static constexpr std::size_t npos = std::numeric_limits<std::size_t>::max();

  /// @brief True if `bin` (item -> replica, replicas `k`) keeps every limit.
  [[nodiscard]] bool fits(std::span<const std::uint32_t> tokens, std::uint32_t k,
                          const replica_limits& lim, std::span<const std::uint32_t> bin) {
    reset(k);
    for (std::size_t x = 0; x < bin.size(); ++x) {
      ++count_[bin[x]];
      used_[bin[x]] += tokens[x];
    }
    for (std::uint32_t r = 0; r < k; ++r)
      if ((lim.max_items != 0 && count_[r] > lim.max_items) ||
          (lim.max_tokens != 0 && used_[r] > lim.max_tokens))
        return false;
    return true;
  }

  /// @brief Rewrites `bin` to keep the limits (see the file comment); returns
  /// `npos`, or the index of an item no replica had room for (then `bin` is
  /// unspecified). `costs`, `tokens` and `bin` have one entry per item.
  std::size_t fit(std::span<const double> costs, std::span<const std::uint32_t> tokens,
                  std::uint32_t k, const replica_limits& lim, std::span<std::uint32_t> bin) {
    const std::size_t n = costs.size();
    order_.resize(n);
    for (std::size_t x = 0; x < n; ++x) order_[x] = static_cast<std::uint32_t>(x);
    std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      if (costs[a] != costs[b]) return costs[a] > costs[b];
      if (tokens[a] != tokens[b]) return tokens[a] > tokens[b];
      return a < b;
    });
    if (place(costs, tokens, k, lim, bin, false) == npos) {
      improve(costs, tokens, k, lim, bin);
      return npos;
    }
    std::sort(order_.begin(), order_.end(), [&](std::uint32_t a, std::uint32_t b) {
      if (tokens[a] != tokens[b]) return tokens[a] > tokens[b];
      if (costs[a] != costs[b]) return costs[a] > costs[b];
      return a < b;
    });
    const std::size_t failed = place(costs, tokens, k, lim, bin, true);
    if (failed == npos) improve(costs, tokens, k, lim, bin);
    return failed;
  }

  /// @brief Grows the scratch for cells of up to `items` items over `k` replicas.
  void reserve(std::size_t items, std::size_t k) {
    order_.reserve(items);
    load_.reserve(k);
    count_.reserve(k);
    used_.reserve(k);
  }

 private:
  void reset(std::uint32_t k) {
    load_.assign(k, 0.0);
    count_.assign(k, 0);
    used_.assign(k, 0);
    big_ = 0;
  }

  // Whether replica r can take one more item of t tokens.
  [[nodiscard]] bool room(std::uint32_t r, std::uint32_t t, const replica_limits& lim,
                          std::size_t n, std::uint32_t k) const noexcept {
    if (lim.max_items != 0 && count_[r] >= lim.max_items) return false;
    if (lim.max_tokens != 0 && used_[r] + t > lim.max_tokens) return false;
    if (lim.equal_count) {
      const std::size_t q = n / k, rem = n % k;
      if (count_[r] > q || (count_[r] == q && big_ >= rem)) return false;
    }
    return true;
  }

  void put(std::size_t x, std::uint32_t r, double c, std::uint32_t t, std::size_t n,
           std::uint32_t k, std::span<std::uint32_t> bin) noexcept {
    if (count_[r] == n / k) ++big_;  // the replica now holds ceil(n / k)
    bin[x] = r;
    load_[r] += c;
    ++count_[r];
    used_[r] += t;
  }

  // Items in order_, each to the best replica with room: the least loaded
  // (by_room false) or the one with the most token room left (by_room true).
  std::size_t place(std::span<const double> costs, std::span<const std::uint32_t> tokens,
                    std::uint32_t k, const replica_limits& lim, std::span<std::uint32_t> bin,
                    bool by_room) {
    const std::size_t n = costs.size();
    reset(k);
    for (const std::uint32_t x : order_) {
      std::uint32_t best = k;
      for (std::uint32_t r = 0; r < k; ++r) {
        if (!room(r, tokens[x], lim, n, k)) continue;
        if (best == k) {
          best = r;
        } else if (by_room ? (used_[r] < used_[best] ||
                              (used_[r] == used_[best] && load_[r] < load_[best]))
                           : load_[r] < load_[best]) {
          best = r;
        }
      }
      if (best == k) return x;
      put(x, best, costs[x], tokens[x], n, k, bin);
    }
    return npos;
  }

  // Moves (unequal counts) or swaps (equal counts: a move would change two
  // counts) of one item off the heaviest replica while that lowers it and
  // keeps every limit; first improvement, at most n rounds and 64 n + 4096
  // candidate moves or swaps looked at in all.
  void improve(std::span<const double> costs, std::span<const std::uint32_t> tokens,
               std::uint32_t k, const replica_limits& lim, std::span<std::uint32_t> bin) {
    const std::size_t n = costs.size();
    std::size_t work = 64 * n + 4096;
    for (std::size_t round = 0; round < n && work > 0; ++round) {
      const auto h =
          static_cast<std::uint32_t>(std::max_element(load_.begin(), load_.end()) - load_.begin());
      bool moved = false;
      for (std::size_t x = 0; x < n && !moved && work > 0; ++x) {
        if (bin[x] != h || costs[x] <= 0.0) continue;
        for (std::uint32_t r = 0; r < k && !moved && work > 0; ++r) {
          if (r == h) continue;
          --work;
          if (!lim.equal_count) {
            const bool fits_r = (lim.max_items == 0 || count_[r] < lim.max_items) &&
                                (lim.max_tokens == 0 || used_[r] + tokens[x] <= lim.max_tokens);
            if (fits_r && load_[r] + costs[x] < load_[h]) {
              shift(x, h, r, costs[x], tokens[x], bin);
              moved = true;
            }
            continue;
          }
          for (std::size_t y = 0; y < n && !moved && work > 0; ++y) {
            --work;
            if (bin[y] != r || costs[y] >= costs[x]) continue;
            const double d = costs[x] - costs[y];
            if (!(load_[r] + d < load_[h])) continue;
            if (lim.max_tokens != 0 && (used_[r] - tokens[y] + tokens[x] > lim.max_tokens ||
                                        used_[h] - tokens[x] + tokens[y] > lim.max_tokens))
              continue;
            shift(x, h, r, costs[x], tokens[x], bin);
            shift(y, r, h, costs[y], tokens[y], bin);
            moved = true;
          }
        }
      }
      if (!moved) return;
    }
  }

  void shift(std::size_t x, std::uint32_t from, std::uint32_t to, double c, std::uint32_t t,
             std::span<std::uint32_t> bin) noexcept {
    bin[x] = to;
    load_[from] -= c;
    load_[to] += c;
    --count_[from];
    ++count_[to];
    used_[from] -= t;
    used_[to] += t;
  }

  std::vector<std::uint32_t> order_;
  std::vector<double> load_;
  std::vector<std::uint32_t> count_;
  std::vector<std::uint64_t> used_;
  std::size_t big_ = 0;
};

}  // namespace disttrain::detail
