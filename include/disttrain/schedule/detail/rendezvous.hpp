#pragma once
/// @file rendezvous.hpp
/// @brief Internal: the deadlock check of `validate_bound` under
/// `p2p_semantics::rendezvous`, NCCL's point-to-point semantics as
/// `disttrain.torch.Runner` issues its ops (docs/python.md, "NCCL").
///
/// Semantics: each rank issues its ops in program order. Its point-to-point
/// ops go out in batches (`p2p_batches`, one NCCL group each); the rank waits
/// until every op of the batch has completed before it goes on, and a message
/// completes once its send's batch and its receive's batch have both been
/// issued (a send blocks until its receive is posted: no buffering). Between
/// two ranks messages match in issue order whatever their tags (compile_bound
/// matched them so). A grad_sync_start joins its bucket's collective; a
/// grad_sync_finish waits until every member has joined. Compute takes no
/// time. A rank that cannot finish deadlocks, and the report names, per
/// blocked rank, the message it waits for and the rank that should send or
/// receive it.
///
/// This is not the timed replay (replay.hpp): that one buffers sends on
/// channels, which is MPI's and gloo's behaviour; a world that passes here
/// passes there (a buffered send never waits longer than a rendezvous one).
/// O(ops).

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/schedule/bound_program.hpp"
#include "disttrain/schedule/detail/compiled.hpp"

namespace disttrain::detail {

/// @brief Runs the check on `w` compiled as `c` (compile_bound); throws
/// `schedule_error` at `where` on deadlock, naming ops by `name(i)` (flat index).
template <class Name>
void check_rendezvous(const bound_world& w, const compiled_program& c, std::string_view where,
                      const Name& name) {
  const std::size_t R = c.num_ranks(), n = c.num_ops();
  std::vector<int> batch(n, -1);
  for (std::size_t r = 0; r < R; ++r) {
    const std::vector<int> b = p2p_batches(w.programs[r]);
    std::copy(b.begin(), b.end(), batch.begin() + static_cast<std::ptrdiff_t>(c.begin[r]));
  }
  std::vector<std::size_t> pc(c.begin.begin(), c.begin.end() - 1);
  std::vector<std::size_t> open(R, 0);  // ops of the rank's issued batch not yet complete
  std::vector<char> issued(n, 0), blocked(R, 0);
  std::vector<std::size_t> joined(c.num_collectives(), 0);
  std::vector<std::vector<std::size_t>> waiting(c.num_collectives());  // ranks at a finish
  std::vector<std::size_t> work;
  const auto members = [&](std::size_t k) { return c.coll_begin[k + 1] - c.coll_begin[k]; };
  const auto wake = [&](std::size_t r) {
    if (blocked[r] != 0) {
      blocked[r] = 0;
      work.push_back(r);
    }
  };
  // Runs rank r until it blocks or ends.
  const auto advance = [&](std::size_t r) {
    const std::size_t end = c.begin[r + 1];
    while (open[r] == 0 && pc[r] < end) {
      const std::size_t i = pc[r];
      const op_kind k = c.kind[i];
      if (batch[i] >= 0) {  // issue the whole batch
        for (std::size_t j = i; j < end && batch[j] == batch[i]; ++j, ++pc[r]) {
          issued[j] = 1;
          ++open[r];
          const op_index q = c.link[j];
          if (issued[q] == 0) continue;
          --open[r];
          const auto peer = static_cast<std::size_t>(c.rank_of[q]);
          if (--open[peer] == 0) wake(peer);
        }
      } else if (k == op_kind::grad_sync_start) {
        const op_index coll = c.collective(i);
        if (++joined[coll] == members(coll))
          for (std::size_t m : waiting[coll]) wake(m);
        ++pc[r];
      } else if (k == op_kind::grad_sync_finish) {
        const op_index coll = c.collective(i);
        if (joined[coll] < members(coll)) {
          waiting[coll].push_back(r);
          break;
        }
        ++pc[r];
      } else {
        ++pc[r];
      }
    }
    if (open[r] != 0 || pc[r] < end) blocked[r] = 1;
  };
  for (std::size_t r = 0; r < R; ++r) advance(r);
  while (!work.empty()) {
    const std::size_t r = work.back();
    work.pop_back();
    advance(r);
  }
  // Where blocked rank r waits: its grad_sync_finish, or the first op of its
  // batch (the last one issued, ending at pc[r]) whose other side is not issued.
  const auto wait_op = [&](std::size_t r) {
    if (open[r] == 0) return pc[r];
    std::size_t i = pc[r] - 1;
    while (i > c.begin[r] && batch[i - 1] == batch[pc[r] - 1]) --i;
    while (issued[c.link[i]] != 0) ++i;
    return i;
  };
  std::string report;
  std::size_t stuck = 0;
  for (std::size_t r = 0; r < R; ++r) {
    if (blocked[r] == 0 || ++stuck > 8) continue;
    const std::size_t i = wait_op(r);
    if (open[r] == 0) {
      report += cat("\n  rank ", r, " waits at ", name(i), " for its DP group");
      continue;
    }
    const op_index q = c.link[i];
    const auto peer = static_cast<std::size_t>(c.rank_of[q]);
    report +=
        cat("\n  rank ", r, " waits at ", name(i), " for rank ", peer, ", which ",
            blocked[peer] != 0 ? cat("waits at ", name(wait_op(peer))) : std::string("has ended"));
  }
  if (stuck == 0) return;
  fail(errc::schedule_error, std::string(where),
       "deadlocks under rendezvous point-to-point semantics (NCCL: a send waits for its "
       "receive, messages between two ranks match in issue order, and each rank issues its "
       "point-to-point ops in p2p_batches and waits for each batch): ",
       stuck, " ranks blocked:", report, stuck > 8 ? "\n  ..." : "");
}

}  // namespace disttrain::detail
