#pragma once
/// @file sim.hpp
/// @brief Discrete-event simulation of schedules and of bound worlds
/// (`simulate_bound`), nvcc-safe. The outputs are included on their own: the
/// SVG timeline `sim/svg.hpp`, the host-only text tables `sim/format.hpp`, and
/// the Perfetto/Chrome trace JSON `sim/trace.hpp` (in `disttrain/json.hpp`).
#include "disttrain/schedule.hpp"
#include "disttrain/sim/duration_model.hpp"
#include "disttrain/sim/simulator.hpp"
