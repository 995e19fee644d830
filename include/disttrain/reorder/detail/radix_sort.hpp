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

/// @brief Sorts `items` by key ascending, stably (equal keys keep their
/// order); `scratch` must hold as many entries. Passes over bytes on which
/// all keys agree are skipped. Allocates nothing.
inline void radix_sort(std::span<radix_item> items, std::span<radix_item> scratch) noexcept {
  const std::size_t n = items.size();
  if (n < 2) return;
  std::array<std::array<std::uint32_t, 256>, 8> count{};
  for (const radix_item& x : items)
    for (std::size_t d = 0; d < 8; ++d) ++count[d][(x.key >> (8 * d)) & 0xffu];
  radix_item* from = items.data();
  radix_item* to = scratch.data();
  for (std::size_t d = 0; d < 8; ++d) {
    auto& c = count[d];
    if (c[(from[0].key >> (8 * d)) & 0xffu] == n) continue;  // every key has this byte
    std::uint32_t sum = 0;
    for (std::uint32_t& v : c) {
      const std::uint32_t here = v;
      v = sum;
      sum += here;
    }
    for (std::size_t i = 0; i < n; ++i) to[c[(from[i].key >> (8 * d)) & 0xffu]++] = from[i];
    std::swap(from, to);
  }
  if (from != items.data())
    for (std::size_t i = 0; i < n; ++i) items[i] = from[i];
}

}  // namespace disttrain::detail
