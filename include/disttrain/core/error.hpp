#pragma once
/// @file error.hpp
/// @brief The one exception type of disttrain (the checks that raise it: `core/check.hpp`).
///
/// Error policy (the whole library, see docs/errors.md):
/// - Every public function that receives bad input throws `disttrain::error`;
///   nothing returns a silent wrong answer and nothing is undefined behaviour.
/// - An error carries a category (`errc`), the place it concerns (`where()`: a
///   field path such as `model.backbone.num_layers`, a module/stage such as
///   `backbone/stage 3`, or a peer such as `rank 5 tag 12`) and a message that
///   names the offending value and the limit it broke.
/// - Programming errors inside disttrain itself are `errc::internal`.
///
/// The checks that raise it are in `core/check.hpp`.
///
/// @snippet core.cpp error

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace disttrain {

/// @brief Category of a disttrain error.
enum class errc {
  invalid_argument,  ///< a value is out of its allowed range or inconsistent
  parse_error,       ///< malformed JSON or a missing / mistyped field
  infeasible,        ///< a request cannot be met (memory, GPU count, ...)
  schedule_error,    ///< a schedule is malformed or deadlocks
  comm_error,        ///< a transfer failed or a peer sent something unexpected
  timeout,           ///< a wait exceeded its deadline
  unsupported,       ///< a feature not compiled in or not available here
  internal,          ///< a broken invariant inside disttrain (a bug)
};

/// @brief Name of an error category, e.g. "invalid_argument".
constexpr std::string_view to_string(errc c) noexcept {
  switch (c) {
    case errc::invalid_argument: return "invalid_argument";
    case errc::parse_error: return "parse_error";
    case errc::infeasible: return "infeasible";
    case errc::schedule_error: return "schedule_error";
    case errc::comm_error: return "comm_error";
    case errc::timeout: return "timeout";
    case errc::unsupported: return "unsupported";
    case errc::internal: return "internal";
  }
  return "unknown";
}

/// @brief The exception every disttrain component throws.
///
/// `what()` reads `disttrain: <category> at <where>: <message>`.
class error : public std::runtime_error {
 public:
  error(errc code, std::string where, const std::string& message)
      : std::runtime_error(compose(code, where, message)),
        code_(code),
        where_(std::move(where)),
        message_(message) {}

  /// @brief Category of the failure.
  [[nodiscard]] errc code() const noexcept { return code_; }
  /// @brief The field, module/stage or peer concerned.
  [[nodiscard]] const std::string& where() const noexcept { return where_; }
  /// @brief The message without the category and location prefix.
  [[nodiscard]] const std::string& message() const noexcept { return message_; }

 private:
  static std::string compose(errc code, const std::string& where, const std::string& message) {
    std::string s = "disttrain: ";
    s += to_string(code);
    if (!where.empty()) {
      s += " at ";
      s += where;
    }
    s += ": ";
    s += message;
    return s;
  }

  errc code_;
  std::string where_;
  std::string message_;
};

}  // namespace disttrain
