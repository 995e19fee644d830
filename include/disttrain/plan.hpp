#pragma once
/// @file plan.hpp
/// @brief The planner part (nvcc-safe): plan value type, evaluation, the exact
/// planner and the Megatron-style baseline, rank layout. A plan is simulated
/// as it would run by `simulate_plan` in `disttrain/bind/simulate_plan.hpp`.
/// The readable tables are in the host-only `disttrain/plan/format.hpp`.
///
/// @snippet plan.cpp umbrella_include
/// @snippet plan.cpp umbrella
///
/// JSON I/O is not included: `disttrain/plan/json.hpp`, and the published-run
/// reader `disttrain/plan/fidelity.hpp` (both in `disttrain/json.hpp`).
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/planner_options.hpp"
#include "disttrain/plan/request.hpp"
