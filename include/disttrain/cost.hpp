#pragma once
/// @file cost.hpp
/// @brief Costs: efficiency curve, collectives, the cost_model concept, the
/// analytic model, calibration and profiling (nvcc-safe).
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/cost/calibration.hpp"
#include "disttrain/cost/collectives.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/efficiency.hpp"
#include "disttrain/cost/profiler.hpp"
#include "disttrain/cost/stage.hpp"
