#pragma once
/// @file checked.hpp
/// @brief Overflow-checked integer arithmetic for sizes, offsets and totals.
///
/// Every product or sum of sizes that comes from input (rows x hidden x
/// element size, buffer offsets, message totals) goes through `checked_mul` /
/// `checked_add`: an overflow throws `errc::invalid_argument` at `where` (the
/// field concerned) instead of wrapping to a small or negative count. Portable
/// (no compiler builtins, fmt-free), so it compiles under nvcc as well.
///
/// @snippet core.cpp checked

#include <limits>
#include <string_view>
#include <type_traits>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief True if `a * b` does not fit in `T`.
template <class T>
[[nodiscard]] constexpr bool mul_overflows(T a, T b) noexcept {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using lim = std::numeric_limits<T>;
  if (a == 0 || b == 0) return false;
  if constexpr (lim::is_signed) {
    if (a > 0) {
      if (b > 0) return a > lim::max() / b;
      return b < lim::min() / a;
    }
    if (b > 0) return a < lim::min() / b;
    return a < lim::max() / b;  // both negative: the product is positive
  } else {
    return a > lim::max() / b;
  }
}

/// @brief True if `a + b` does not fit in `T`.
template <class T>
[[nodiscard]] constexpr bool add_overflows(T a, T b) noexcept {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  using lim = std::numeric_limits<T>;
  if constexpr (lim::is_signed) {
    return b > 0 ? a > lim::max() - b : a < lim::min() - b;
  } else {
    return a > lim::max() - b;
  }
}

/// @brief `a * b`, or `errc::invalid_argument` at `where` if it overflows `T`.
template <class T>
[[nodiscard]] T checked_mul(T a, T b, std::string_view where) {
  if (mul_overflows(a, b))
    fail(errc::invalid_argument, where, "size overflow: ", +a, " x ", +b, " exceeds ",
         +std::numeric_limits<T>::max());
  return static_cast<T>(a * b);
}

/// @brief `a + b`, or `errc::invalid_argument` at `where` if it overflows `T`.
template <class T>
[[nodiscard]] T checked_add(T a, T b, std::string_view where) {
  if (add_overflows(a, b))
    fail(errc::invalid_argument, where, "size overflow: ", +a, " + ", +b, " exceeds ",
         +std::numeric_limits<T>::max());
  return static_cast<T>(a + b);
}

}  // namespace disttrain
