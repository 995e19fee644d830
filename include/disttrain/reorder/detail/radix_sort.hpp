#pragma once
/// @file radix_sort.hpp
/// @brief Internal: stable LSD radix sort of (64-bit key, index) pairs, and
/// order-preserving keys for doubles. Used by the reorderer and the
/// partitioner to rank thousands of samples in O(n) instead of O(n log n)
/// comparisons; the result equals that of a comparison sort on (key, index)
/// because the input arrives in ascending index order and the sort is stable.

#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>

namespace disttrain::detail {

/// @brief A sort key and the index it belongs to.
struct radix_item {
  std::uint64_t key;
  std::uint32_t index;
};

/// @brief Key whose unsigned order is the order of `d` (any non-NaN double;
/// -0.0 and +0.0 map to the same key, as they compare equal).
[[nodiscard]] inline std::uint64_t ascending_key(double d) noexcept {
  auto b = std::bit_cast<std::uint64_t>(d);
  constexpr std::uint64_t sign = std::uint64_t{1} << 63;
  if (b == sign) b = 0;  // -0.0 == +0.0
  return (b & sign) != 0 ? ~b : b | sign;
}

/// @brief Key whose unsigned order is the reverse order of `d`.
[[nodiscard]] inline std::uint64_t descending_key(double d) noexcept { return ~ascending_key(d); }

/// @brief Internal: stable byte passes over bytes `first` .. `first + 3` of
/// the keys (0: the low half, 4: the high half), skipping bytes on which all
/// keys agree; the result ends in `items`.
inline void radix_passes(std::span<radix_item> items, std::span<radix_item> scratch,
                         std::size_t first) noexcept {
  const std::size_t n = items.size();
  std::array<std::array<std::uint32_t, 256>, 4> count{};
  for (const radix_item& x : items)
    for (std::size_t d = 0; d < 4; ++d) ++count[d][(x.key >> (8 * (first + d))) & 0xffu];
  radix_item* from = items.data();
  radix_item* to = scratch.data();
  for (std::size_t d = 0; d < 4; ++d) {
    const std::size_t shift = 8 * (first + d);
    auto& c = count[d];
    if (c[(from[0].key >> shift) & 0xffu] == n) continue;  // every key has this byte
    std::uint32_t sum = 0;
    for (std::uint32_t& v : c) {
      const std::uint32_t here = v;
      v = sum;
      sum += here;
    }
    for (std::size_t i = 0; i < n; ++i) to[c[(from[i].key >> shift) & 0xffu]++] = from[i];
    std::swap(from, to);
  }
  if (from != items.data())
    for (std::size_t i = 0; i < n; ++i) items[i] = from[i];
}

/// @brief Sorts `items` by key ascending, stably (equal keys keep their
/// order); `scratch` must hold as many entries. Allocates nothing.
///
/// Byte passes (least significant first) over the keys' high 32 bits, then
/// one scan that orders each run of equal high halves by the low halves:
/// insertion sort for short runs, byte passes over the low 32 bits for long
/// ones. Keys of nearby doubles differ in their high half, so the low half
/// rarely costs anything. Passes over bytes on which all keys agree are skipped.
inline void radix_sort(std::span<radix_item> items, std::span<radix_item> scratch) noexcept {
  const std::size_t n = items.size();
  if (n < 2) return;
  radix_passes(items, scratch, 4);
  constexpr std::size_t short_run = 32;
  for (std::size_t b = 0; b < n;) {
    const std::uint64_t high = items[b].key >> 32;
    std::size_t e = b + 1;
    while (e < n && items[e].key >> 32 == high) ++e;
    if (e - b > short_run) {
      radix_passes(items.subspan(b, e - b), scratch, 0);
    } else {
      for (std::size_t i = b + 1; i < e; ++i) {  // stable: moves past larger keys only
        const radix_item x = items[i];
        std::size_t j = i;
        for (; j > b && items[j - 1].key > x.key; --j) items[j] = items[j - 1];
        items[j] = x;
      }
    }
    b = e;
  }
}

}  // namespace disttrain::detail
