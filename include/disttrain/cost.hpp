#pragma once
/// @file cost.hpp
/// @brief Costs: efficiency curve, collectives, the cost_model concept and the
/// analytic model (nvcc-safe).
///
/// Calibration and profiling use Eigen and are not included here: include
/// `disttrain/cost/calibration.hpp` / `disttrain/cost/profiler.hpp` and link
/// the CMake target `disttrain::calibration` (docs/packaging.md).
///
/// JSON I/O is not included: `disttrain/cost/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/cost/collectives.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/cost/stage.hpp"
