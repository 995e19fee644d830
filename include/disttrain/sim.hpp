#pragma once
/// @file sim.hpp
/// @brief Discrete-event simulation of schedules and of bound worlds
/// (`simulate_bound`), and timeline export (Perfetto/Chrome trace JSON, standalone SVG). nvcc-safe; the text tables
/// live in the host-only `sim/format.hpp`.
#include "disttrain/schedule.hpp"
#include "disttrain/sim/bound_simulator.hpp"
#include "disttrain/sim/duration_model.hpp"
#include "disttrain/sim/simulator.hpp"
#include "disttrain/sim/svg.hpp"
#include "disttrain/sim/trace.hpp"
