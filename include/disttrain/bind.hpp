#pragma once
/// @file bind.hpp
/// @brief The adapters that join parts, in one place (docs/architecture.md):
/// the sample map's placements for comm/'s routes (`placement.hpp`), the
/// simulator as a reorder objective (`sim_objective.hpp`), cost-model sample
/// costs (`workload_cost.hpp`), the reorder options and costs derived from
/// a plan (`plan_reorder.hpp`), a plan simulated as it would run
/// (`simulate_plan.hpp`), and on sampled batches, arrival order vs reordered
/// (`heterogeneity.hpp`). Every other part includes only the parts
/// before it in the data flow; bind/ may include any part.
///
/// JSON I/O is not included: `disttrain/bind/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/bind/data_plan.hpp"
#include "disttrain/bind/heterogeneity.hpp"
#include "disttrain/bind/placement.hpp"
#include "disttrain/bind/plan_reorder.hpp"
#include "disttrain/bind/sim_objective.hpp"
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/bind/workload_cost.hpp"
