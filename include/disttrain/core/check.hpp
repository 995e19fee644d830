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
/// `parts` are streamed into the message by `cat` (precision 10, no fmt, so
/// the header compiles under nvcc). A NaN fails every comparison check.
///
/// @snippet core.cpp check_header

#include <sstream>
#include <string>
#include <string_view>

#include "disttrain/core/error.hpp"

namespace disttrain {

/// @brief Concatenates streamable values into a string (precision 10).
/// @snippet core.cpp cat
template <class... Ts>
[[nodiscard]] std::string cat(const Ts&... parts) {
  std::ostringstream os;
  os.precision(10);
  (os << ... << parts);
  return os.str();
}

/// @brief Throws `error(code, where, cat(parts...))`.
/// @snippet core.cpp fail
template <class... Ts>
[[noreturn]] void fail(errc code, std::string_view where, const Ts&... parts) {
  throw error(code, std::string(where), cat(parts...));
}

/// @brief Throws `errc::invalid_argument` at `where` unless `cond` holds.
/// @snippet core.cpp require
template <class... Ts>
void require(bool cond, std::string_view where, const Ts&... parts) {
  if (!cond) fail(errc::invalid_argument, where, parts...);
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
  if (!cond) fail(errc::internal, where, "internal invariant broken: ", parts...);
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
