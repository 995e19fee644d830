#pragma once
/// @file plan_stamp.hpp
/// @brief The 32-byte stamp sent with every message of a route
/// (route_transfer.hpp) and of a bound program (exec/executor.hpp), and the
/// hex formatting of 64-bit fingerprints in their errors.

#include <cstddef>
#include <cstdint>
#include <string>

namespace disttrain {

/// @brief Sent with every message of a route (32 bytes, one small extra message,
/// no extra round trip: the receiver posts its receive with the payload's):
/// the sender's plan fingerprint and the message's stamp (plan fingerprint
/// mixed with src, dst, phase and element count). The receiver compares the
/// stamp with the one its own plan gives. `route_transfer` sends it ahead of
/// the payload; the executor sends it right after a bound message's payload,
/// on the same tag, with `plan` = 0 (a bound op holds only its stamp).
///
/// A rank that fails before it sent a message sends an *abort stamp* in its
/// place (`abort_value`, `plan` = its error code): the receiver fails at once
/// naming that rank instead of waiting for its own timeout.
///
/// The same 32 bytes carry `route_transfer`'s *abort notices* the other way,
/// from a failed rank to the ranks that send to it, on the route's control
/// tag (`route_control_tag`): `magic` = `notice_value`, `plan` = the failed
/// rank's error code, `message` = the route's sequence number between the
/// two ranks (`route_sequences`), `bytes` = 0. A sender whose sends failed
/// after they were posted (a timeout) sends a *void notice* the same way to
/// their receivers (`magic` = `void_value`): a late receiver fails naming it
/// instead of taking bytes the sender's application may since have reused.
struct plan_stamp {
  static constexpr std::int64_t magic_value = 0x44545253544d50ll;   // "DTRSTMP"
  static constexpr std::int64_t abort_value = 0x44545241425254ll;   // "DTRABRT"
  static constexpr std::int64_t notice_value = 0x4454524e4f5443ll;  // "DTRNOTC"
  static constexpr std::int64_t void_value = 0x445452564f4944ll;    // "DTRVOID"
  std::int64_t magic = magic_value;
  std::uint64_t plan = 0;     ///< the sender's `route_plan::fingerprint()` (abort: its errc)
  std::uint64_t message = 0;  ///< `route_plan::stamp(m)` (`bound_op::stamp`)
  std::uint64_t bytes = 0;    ///< the payload's size on the sender's side
};
static_assert(sizeof(plan_stamp) == 4 * sizeof(std::int64_t));

/// @brief A 64-bit fingerprint as errors print it: "0x0123456789abcdef".
[[nodiscard]] inline std::string hex64(std::uint64_t v) {
  constexpr char digits[] = "0123456789abcdef";
  std::string s = "0x0000000000000000";
  for (std::size_t i = 0; i < 16; ++i) s[17 - i] = digits[(v >> (4 * i)) & 15u];
  return s;
}

}  // namespace disttrain
