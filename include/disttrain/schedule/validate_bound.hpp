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
/// Two semantics of point-to-point messages (`p2p_semantics`):
/// - `buffered` (the default): MPI's and gloo's, as the C++ executor runs
///   them: a send leaves without waiting for its receive;
/// - `rendezvous`: NCCL's, as `disttrain.torch.Runner` issues its ops: a
///   send waits until its receive is posted, messages between two ranks
///   match in issue order whatever their tags (one stream per pair of
///   ranks), and each rank issues its point-to-point ops in `p2p_batches`
///   (one NCCL group each) and waits for each batch before it goes on
///   (schedule/detail/rendezvous.hpp). Stricter: a world valid here is
///   valid buffered.
///
/// @snippet schedule.cpp validate_bound

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/detail/compile_bound.hpp"
#include "disttrain/schedule/detail/rendezvous.hpp"
#include "disttrain/schedule/detail/replay.hpp"

namespace disttrain {

/// @brief How point-to-point messages progress (see the file comment).
enum class p2p_semantics : std::uint8_t {
  buffered,    ///< MPI, gloo: a send does not wait for its receive
  rendezvous,  ///< NCCL: a send waits for its receive; ops issued in `p2p_batches`
};

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
bound_report validate_world(const bound_world& w, std::string_view where, const Name& name,
                            p2p_semantics p2p = p2p_semantics::buffered) {
  compiled_program c;
  compile_bound(w, c);
  const auto name_of = [&](std::size_t i) { return name(c, i); };
  if (p2p == p2p_semantics::rendezvous) {
    check_rendezvous(w, c, where, name_of);
  } else {
    std::vector<interval> times(c.num_ops());  // zero durations
    replay_state st;
    if (!replay(c, true, st, times.data())) report_deadlock(c, st, std::string(where), name_of);
  }
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

/// @brief Validates `w` under the point-to-point semantics `p2p` (see the
/// file comment).
inline bound_report validate_bound(const bound_world& w,
                                   p2p_semantics p2p = p2p_semantics::buffered) {
  return detail::validate_world(
      w, "bound_world",
      [&](const detail::compiled_program& c, std::size_t i) {
        return detail::name_bound_op(w, c, i);
      },
      p2p);
}

}  // namespace disttrain
