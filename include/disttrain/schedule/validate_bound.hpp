#pragma once
/// @file validate_bound.hpp
/// @brief Checks a bound world (bind/bind.hpp) before it runs: every message
/// has its receive with the same tag, byte count and stamp, messages between two
/// ranks match in program order, every DP group member joins each gradient
/// bucket it finishes, and no rank deadlocks. Throws `errc::schedule_error`
/// naming the op (for a deadlock: the op every blocked rank waits at).
///
/// The check compiles the world (schedule/detail/compile_bound.hpp) and runs
/// the one replay (schedule/detail/replay.hpp, the simulator's) at zero
/// durations; the compute order of each rank was already validated on the
/// chain schedule it was bound from.
///
/// @snippet schedule.cpp validate_bound

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/detail/compile_bound.hpp"
#include "disttrain/schedule/detail/replay.hpp"

namespace disttrain {

/// @brief What `validate_bound` counted on a valid world.
struct bound_report {
  std::size_t ops = 0;       ///< ops over all ranks
  std::size_t messages = 0;  ///< point-to-point messages (sends)
  std::int64_t bytes = 0;    ///< bytes of all messages
};

namespace detail {
/// @brief `validate_bound(w)`, naming flat op i of the compiled world `c`
/// by `name(c, i)` in a deadlock report: the one validator of programs (`validate_schedule`
/// runs it on a schedule's trivial binding, with the schedule's op names).
template <class Name>
bound_report validate_world(const bound_world& w, std::string_view where, const Name& name) {
  compiled_program c;
  compile_bound(w, c);
  std::vector<interval> times(c.num_ops());  // zero durations
  replay_state st;
  if (!replay(c, true, st, times.data()))
    report_deadlock(c, st, std::string(where), [&](std::size_t i) { return name(c, i); });
  bound_report rep;
  for (const auto& p : w.programs)
    for (const auto& b : p.ops) {
      ++rep.ops;
      if (is_send(b.op.kind)) {
        ++rep.messages;
        rep.bytes += b.bytes;
      }
    }
  return rep;
}
}  // namespace detail

/// @brief Validates `w` (see the file comment).
inline bound_report validate_bound(const bound_world& w) {
  return detail::validate_world(w, "bound_world",
                                [&](const detail::compiled_program& c, std::size_t i) {
                                  return detail::name_bound_op(w, c, i);
                                });
}

}  // namespace disttrain
