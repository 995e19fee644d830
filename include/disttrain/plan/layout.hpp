#pragma once
/// @file layout.hpp
/// @brief From a plan to its rank layout (the single source of truth for
/// communicators, reordering and execution).
///
/// Every disaggregated module becomes one segment, in pipeline order, on a
/// contiguous block of ranks; colocated modules run on the ranks of the
/// backbone's first/last stage and have no segment. Placement keeps every TP
/// group inside a node: `rank_layout` checks that each segment's first rank is
/// a multiple of its TP degree (the planner only returns plans that satisfy
/// this).

#include <utility>
#include <vector>

#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/rank_layout.hpp"

namespace disttrain {

/// @brief The rank layout of `p` (validates `p`; a segment whose base rank is
/// not a multiple of its TP degree throws `invalid_argument` naming it).
/// @snippet plan.cpp to_rank_layout
[[nodiscard]] inline rank_layout to_rank_layout(const parallel_plan& p) {
  validate(p);
  std::vector<segment_spec> segs;
  for (const auto& m : p.modules)
    if (!m.colocated) segs.push_back(segment_spec{m.name, m.role, m.tp, m.pp, m.dp});
  return rank_layout(std::move(segs), p.gpus_per_node);
}

}  // namespace disttrain
