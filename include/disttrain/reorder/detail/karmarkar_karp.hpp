#pragma once
/// @file karmarkar_karp.hpp
/// @brief Internal: k-way Karmarkar-Karp largest differencing (the method verl
/// uses), the `karmarkar_karp` balance method of `partitioner`, with sparse
/// states: O(n log n + n k) time at worst and O(n + k) memory.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <span>
#include <vector>

#include "disttrain/reorder/detail/partition_workspace.hpp"

namespace disttrain::detail {

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
// run (already in part order) and the sums (at most 2 min(p, q) parts) are
// put in part order and inserted into it from the back (binary search +
// block moves). The merged state waits outside the heap for the next pop,
// which often takes it at once. A segment that must grow
// moves to the pool's end with twice the room (at most k); a full pool is
// compacted. Singletons (the non-equal start) wait in rank order, which is
// their (spread desc, id asc) order, so the heap holds merged states only.
// Time O(n log n + n k) at worst (the block moves; the sums are bounded by
// n in all since each removes a node), memory O(n): nodes, the pool (4n
// ids, two buffers), per-state offsets.
/// @brief k-way largest differencing (above); owns its nodes, states and pool.
class karmarkar_karp_partition {
 public:
  /// @brief Grows the nodes, states and pool for n items.
  void reserve(std::size_t n) {
    for (auto* v : {&next_, &kk_heap_})
      if (v->capacity() < n + 1) v->reserve(n + 1);
    if (kk_node_.capacity() < n) kk_node_.reserve(n);
    for (auto* v : {&kk_size_, &kk_cap_, &kk_new_})
      if (v->capacity() < n) v->reserve(n);  // kk_new_: at most min(n, k) parts
    if (kk_off_.capacity() < n) kk_off_.reserve(n);
    for (auto* v : {&kk_pool_, &kk_spare_})
      if (v->capacity() < 4 * n) v->reserve(4 * n);
    if (kk_spread_.capacity() < n) kk_spread_.reserve(n);
  }

  /// @brief Assigns every item of `ws` (ranked in ws.order) to a bin.
  void run(const partition_workspace& ws, std::span<std::uint32_t> bin_of) {
    const std::size_t n = ws.costs.size();
    const std::size_t k = ws.k;
    k_ = ws.k;
    next_.assign(n, nil);
    kk_node_.resize(n);
    for (std::size_t r = 0; r < n; ++r) {
      const std::uint32_t item = ws.order[r];
      kk_node_[r] = kk_node{ws.costs[item], 1, item, item};
    }
    if (kk_pool_.size() < 4 * n) kk_pool_.resize(4 * n);
    if (kk_spare_.size() < 4 * n) kk_spare_.resize(4 * n);
    if (kk_new_.size() < n) kk_new_.resize(n);
    for (std::size_t r = 0; r < n; ++r) kk_pool_[r] = static_cast<std::uint32_t>(r);
    kk_used_ = n;
    // Initial states: one item each, or (equal count) k consecutive ranked
    // items (already in part order: ranked by cost desc, index asc).
    const std::size_t states = ws.equal ? (n + k - 1) / k : n;
    kk_off_.resize(states);
    kk_size_.resize(states);
    kk_cap_.resize(states);
    kk_spread_.resize(states);
    for (std::size_t s = 0; s < states; ++s) {
      const std::size_t b = ws.equal ? s * k : s;
      const std::size_t e = ws.equal ? std::min(n, b + k) : s + 1;
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
    const std::size_t singles = ws.equal ? 0 : states;
    kk_heap_.clear();
    if (ws.equal) {
      for (std::size_t s = 0; s < states; ++s) kk_heap_.push_back(static_cast<std::uint32_t>(s));
      std::make_heap(kk_heap_.begin(), kk_heap_.end(), heap_less);
    }
    // The state just merged waits outside the heap: the next pop takes it
    // directly when it beats the heap's top and the next singleton (a push
    // and a pop saved), else it goes into the heap first.
    std::uint32_t merged = nil;
    const auto pop = [&]() -> std::uint32_t {
      if (merged != nil) {
        const std::uint32_t x = merged;
        merged = nil;
        if ((kk_heap_.empty() || better(x, kk_heap_.front())) &&
            (single == singles || better(x, static_cast<std::uint32_t>(single))))
          return x;
        kk_heap_.push_back(x);
        std::push_heap(kk_heap_.begin(), kk_heap_.end(), heap_less);
      }
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
      // The new parts, in part order: the other state's lone run (already in
      // part order) and the sums, each put at its place when they are few.
      std::uint32_t* const fresh = kk_new_.data();
      std::size_t fresh_size = keep_a ? b_only : a_only;
      std::copy_n(keep_a ? B : A, fresh_size, fresh);
      const bool few_sums = p + q <= k + few_parts;
      for (std::size_t i = k - q; i < p; ++i) {  // sums: part i of a with part k-1-i of b
        kk_node& x = kk_node_[A[i]];
        const kk_node& y = kk_node_[B[k - 1 - i]];
        x.sum += y.sum;
        x.count += y.count;
        next_[x.tail] = y.head;
        x.tail = y.tail;
        std::uint32_t* at = fresh + fresh_size;
        if (few_sums) {
          at = std::partition_point(fresh, at, [&](std::uint32_t e) { return before(e, A[i]); });
          std::copy_backward(at, fresh + fresh_size, fresh + fresh_size + 1);
        }
        *at = A[i];
        ++fresh_size;
      }
      if (!few_sums) std::sort(fresh, fresh + fresh_size, before);
      std::uint32_t* seg = kk_pool_.data() + kk_off_[t];
      if (r > kk_cap_[t]) {  // move: merge the kept run and the new parts into a new segment
        const std::size_t cap = std::min(k, 2 * r);
        std::uint32_t* out = kk_pool_.data() + kk_used_;
        std::merge(seg, seg + kept, fresh, fresh + fresh_size, out, before);
        kk_off_[t] = kk_used_;
        kk_cap_[t] = static_cast<std::uint32_t>(cap);
        kk_used_ += cap;
      } else {  // in place, from the back: each new part after the kept parts that precede it
        std::size_t i = kept, w = r;
        for (std::size_t j = fresh_size; j-- > 0;) {
          const std::uint32_t x = fresh[j];
          // (often the new part goes after every kept part: one comparison)
          const std::size_t pos =
              i == 0 || before(seg[i - 1], x)
                  ? i
                  : static_cast<std::size_t>(
                        std::partition_point(seg, seg + i - 1,
                                             [&](std::uint32_t e) { return before(e, x); }) -
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
      merged = a;
    }
    const std::uint32_t root = merged != nil      ? merged
                               : kk_heap_.empty() ? static_cast<std::uint32_t>(single)
                                                  : kk_heap_.front();
    for (std::size_t i = 0; i < kk_size_[root]; ++i)
      for (std::uint32_t item = kk_node_[kk_pool_[kk_off_[root] + i]].head; item != nil;
           item = next_[item])
        bin_of[item] = static_cast<std::uint32_t>(i);
  }

 private:
  static constexpr std::uint32_t nil = std::numeric_limits<std::uint32_t>::max();
  // A merge's sums are put in place one by one up to this many, else sorted.
  static constexpr std::size_t few_parts = 16;

  // A non-empty part of a KK state: its sum, item count and item list
  // (head .. tail through next_).
  struct kk_node {
    double sum;
    std::uint32_t count, head, tail;
  };

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

  std::size_t k_ = 1;  // bins of the current run
  std::vector<std::uint32_t> next_, kk_heap_;
  std::vector<kk_node> kk_node_;  // parts, one node per item
  std::vector<std::uint32_t> kk_pool_, kk_spare_, kk_size_, kk_cap_, kk_new_;
  std::vector<std::size_t> kk_off_;  // segment offsets in kk_pool_ (up to 4n)
  std::vector<double> kk_spread_;
  std::size_t kk_used_ = 0;
};

}  // namespace disttrain::detail
