#pragma once
/// @file reorder_plan.hpp
/// @brief Internal: the state of one candidate plan of the `reorderer` (the
/// slot cut, every cell's split, the microbatch order and its objective), kept
/// in one struct so that the reorderer holds a primary and a saved plan and
/// exchanges or copies them as a whole.

#include <cstddef>
#include <cstdint>
#include <vector>

namespace disttrain::detail {

/// @brief A slot with a cell no split could fit: the unplaced sample (input
/// index + 1; 0: none) and its module.
struct cell_failure {
  std::uint32_t sample = 0, module = 0;
};

/// @brief One plan of the reorderer: what write_result reads (steps 2-4 of
/// reorderer.hpp). Indexes: i = input index, k = module, j = slot, p = position.
struct reorder_plan {
  double time = 0.0;                    ///< objective of the plan (+inf: infeasible)
  std::vector<std::uint32_t> seq;       ///< input indexes slot by slot (the cut)
  std::vector<std::uint32_t> slot;      ///< slot of input index i
  std::vector<std::uint32_t> replica;   ///< replica of (i, k), at i * K + k
  std::vector<std::uint32_t> offset;    ///< position in its cell of (i, k)
  std::vector<std::uint32_t> perm;      ///< perm[p] = slot at position p
  std::vector<std::uint32_t> position;  ///< position[j] = position of slot j
  std::vector<double> slot_load;        ///< load per (module, slot, replica)
  std::vector<double> slowest;          ///< slowest replica's load per (k, j), at k * m + j
  std::vector<std::uint32_t> ranking;   ///< per cell: its members by cost (a partitioner hint)
  std::vector<cell_failure> bad;        ///< per slot: the cell no split could fit
  std::size_t bad_slots = 0;            ///< slots with such a cell
  bool refined = false;  ///< cells split by `balance_method::refined` (the exact finish applies)

  /// @brief Copies `other` into this plan's buffers (no allocation once they
  /// have the capacity).
  void copy_from(const reorder_plan& other) {
    time = other.time;
    seq.assign(other.seq.begin(), other.seq.end());
    slot.assign(other.slot.begin(), other.slot.end());
    replica.assign(other.replica.begin(), other.replica.end());
    offset.assign(other.offset.begin(), other.offset.end());
    perm.assign(other.perm.begin(), other.perm.end());
    position.assign(other.position.begin(), other.position.end());
    slot_load.assign(other.slot_load.begin(), other.slot_load.end());
    slowest.assign(other.slowest.begin(), other.slowest.end());
    ranking.assign(other.ranking.begin(), other.ranking.end());
    bad.assign(other.bad.begin(), other.bad.end());
    bad_slots = other.bad_slots;
    refined = other.refined;
  }
};

}  // namespace disttrain::detail
