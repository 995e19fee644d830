#pragma once
/// @file sim.hpp
/// @brief Discrete-event simulation of schedules and of bound worlds
/// (`simulate_bound`), and the standalone SVG timeline. nvcc-safe; the text
/// tables live in the host-only `sim/format.hpp`, the Perfetto/Chrome trace
/// JSON in `disttrain/sim/trace.hpp` (in `disttrain/json.hpp`).
#include "disttrain/schedule.hpp"
#include "disttrain/sim/bound_simulator.hpp"
#include "disttrain/sim/duration_model.hpp"
#include "disttrain/sim/simulator.hpp"
#include "disttrain/sim/svg.hpp"
