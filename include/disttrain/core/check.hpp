#pragma once
/// @file check.hpp
/// @brief The checks that raise `disttrain::error`, for the library and for
/// host code: a custom cost model, a sample source or a tool reports bad input
/// the way disttrain does, with a category, a location and a message.
///
/// | check | throws |
/// |---|---|
/// | `require(cond, where, parts...)` | `errc::invalid_argument` unless `cond` |
/// | `require_positive(v, where)` | `invalid_argument` unless `v > 0` |
/// | `require_non_negative(v, where)` | `invalid_argument` unless `v >= 0` |
/// | `require_in_range(v, lo, hi, where)` | `invalid_argument` unless `lo <= v <= hi` |
/// | `ensure(cond, where, parts...)` | `errc::internal` unless `cond` (a broken invariant: a bug) |
/// | `fail(code, where, parts...)` | always: `error(code, where, cat(parts...))` |
///
/// `parts` are joined into the message by `cat`: text, characters, numbers
/// (floating point with 10 significant digits) and types with an ADL-visible
/// `to_string`; no iostreams and no fmt, so the header is light and compiles
/// under nvcc. A NaN fails every comparison check.
///
/// @snippet core.cpp check_header

#include <concepts>
#include <cstddef>
#include <cstdio>
#include <initializer_list>
#include <string>
#include <string_view>
#include <type_traits>

#include "disttrain/core/error.hpp"

namespace disttrain {

namespace detail {
/// @brief A type `cat` formats through an ADL-visible `to_string(value)`
/// (e.g. `to_string(errc)`): neither text nor a number, which have their own rules.
template <class T>
concept has_adl_to_string =
    !std::is_arithmetic_v<T> && !std::convertible_to<const T&, std::string_view> &&
    requires(const T& v) {
  { to_string(v) } -> std::convertible_to<std::string_view>;
};

/// @brief One part of a `cat` message. Text is viewed, not copied; a number is
/// kept by value. `append_to` prints it as `std::ostream` with `precision(10)`
/// would (`%.10g`, integers in full, `bool` as 1/0, `char` as itself), except
/// that `signed char` / `unsigned char` (`int8_t`, `uint8_t`) print as numbers.
/// No iostreams: resolving `operator<<` at every call site cost parse time in
/// every header that reports an error.
class cat_part {
 public:
  // Implicit on purpose: `cat` converts each argument.
  cat_part(std::string_view text) noexcept : text_(text) {}               // NOLINT
  cat_part(const char* text) noexcept : text_(text ? text : "(null)") {}  // NOLINT
  cat_part(char c) noexcept : kind_(kind::character), c_(c) {}            // NOLINT
  cat_part(bool b) noexcept : text_(b ? "1" : "0") {}                     // NOLINT
  template <std::signed_integral I>
  cat_part(I v) noexcept : kind_(kind::signed_int), i_(v) {}  // NOLINT
  template <std::unsigned_integral U>
  cat_part(U v) noexcept : kind_(kind::unsigned_int), u_(v) {}  // NOLINT
  template <std::floating_point F>
  cat_part(F v) noexcept : kind_(kind::floating), f_(static_cast<long double>(v)) {}  // NOLINT
  template <has_adl_to_string T>
  cat_part(const T& v) : kind_(kind::owned), owned_(to_string(v)) {}  // NOLINT

  /// @brief Appends the part to `out`.
  void append_to(std::string& out) const {
    switch (kind_) {
      case kind::text: out += text_; return;
      case kind::owned: out += owned_; return;
      case kind::character: out += c_; return;
      case kind::signed_int: out += std::to_string(i_); return;
      case kind::unsigned_int: out += std::to_string(u_); return;
      case kind::floating: {
        char buf[64];  // "%.10Lg" prints at most 17 characters
        const int n = std::snprintf(buf, sizeof buf, "%.10Lg", f_);
        if (n > 0) out.append(buf, static_cast<std::size_t>(n));
        return;
      }
    }
  }

 private:
  enum class kind : unsigned char { text, owned, character, signed_int, unsigned_int, floating };
  kind kind_ = kind::text;
  std::string_view text_;
  std::string owned_;
  char c_ = 0;
  long long i_ = 0;
  unsigned long long u_ = 0;
  long double f_ = 0;
};

/// @brief The parts, appended in order.
[[nodiscard]] inline std::string cat_parts(std::initializer_list<cat_part> parts) {
  std::string s;
  for (const cat_part& p : parts) p.append_to(s);
  return s;
}

/// @brief Throws `error(code, where, cat_parts(parts))`: the one body behind
/// `fail`, `require` and `ensure`, so that each check instantiates one small
/// template per argument list rather than three.
[[noreturn]] inline void throw_error(errc code, std::string_view where,
                                     std::initializer_list<cat_part> parts) {
  throw error(code, std::string(where), cat_parts(parts));
}
}  // namespace detail

/// @brief Concatenates values into a string: text (`std::string`,
/// `std::string_view`, C strings), characters, integers, floating-point values
/// (10 significant digits, as `std::ostream` with `precision(10)` prints them)
/// and any type with an ADL-visible `to_string` (e.g. `errc`).
/// @snippet core.cpp cat
template <class... Ts>
[[nodiscard]] std::string cat(const Ts&... parts) {
  return detail::cat_parts({detail::cat_part(parts)...});
}

/// @brief Throws `error(code, where, cat(parts...))`.
///
/// The parts are taken by value, so a string literal decays to a pointer and
/// calls that differ only in their literals' lengths share one instantiation
/// (half of `fail`'s instantiations in `disttrain.hpp`; docs/header_cost.md).
/// `fail` always throws, so the copies cost nothing that matters.
/// @snippet core.cpp fail
template <class... Ts>
[[noreturn]] void fail(errc code, std::string_view where, Ts... parts) {
  detail::throw_error(code, where, {detail::cat_part(parts)...});
}

/// @brief Throws `errc::invalid_argument` at `where` unless `cond` holds.
/// @snippet core.cpp require
template <class... Ts>
void require(bool cond, std::string_view where, const Ts&... parts) {
  if (!cond) detail::throw_error(errc::invalid_argument, where, {detail::cat_part(parts)...});
}

/// @brief As above with a location built only on failure: `where()` returns
/// it (e.g. `[&] { return cat("samples[", i, "]"); }`), for checks in loops,
/// where building the string each time would cost more than the check.
template <class Where, class... Ts>
requires std::is_invocable_r_v<std::string, const Where&>
void require(bool cond, const Where& where, const Ts&... parts) {
  if (!cond) detail::throw_error(errc::invalid_argument, where(), {detail::cat_part(parts)...});
}

/// @brief Requires `value > 0`.
/// @snippet core.cpp require_positive
template <class T>
void require_positive(const T& value, std::string_view where) {
  if (!(value > T{})) fail(errc::invalid_argument, where, "must be > 0, got ", value);
}

/// @brief Requires `value >= 0`.
/// @snippet core.cpp require_non_negative
template <class T>
void require_non_negative(const T& value, std::string_view where) {
  if (!(value >= T{})) fail(errc::invalid_argument, where, "must be >= 0, got ", value);
}

/// @brief Requires `lo <= value <= hi`.
/// @snippet core.cpp require_in_range
template <class T>
void require_in_range(const T& value, const T& lo, const T& hi, std::string_view where) {
  if (!(value >= lo && value <= hi))
    fail(errc::invalid_argument, where, "must be in [", lo, ", ", hi, "], got ", value);
}

/// @brief Throws `errc::internal` unless `cond`: an invariant of disttrain (or
/// of the host's own code) broke.
/// @snippet core.cpp ensure
template <class... Ts>
void ensure(bool cond, std::string_view where, const Ts&... parts) {
  if (!cond) {
    detail::throw_error(errc::internal, where,
                        {"internal invariant broken: ", detail::cat_part(parts)...});
  }
}

namespace detail {
/// @brief Joins a parent path and a key: `join_path("model", "layers") == "model.layers"`
/// (the field paths errors name).
[[nodiscard]] inline std::string join_path(std::string_view parent, std::string_view key) {
  if (parent.empty()) return std::string(key);
  std::string s(parent);
  s += '.';
  s += key;
  return s;
}
}  // namespace detail

}  // namespace disttrain
