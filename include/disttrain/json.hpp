#pragma once
/// @file json.hpp
/// @brief Every JSON reader and writer of the library, in one include (nvcc-safe):
/// each part's `<part>/json.hpp` (`to_json` / `from_json` of its value types),
/// the trace writers (`sim/trace.hpp`, `exec/trace.hpp`) and the published-run
/// reader (`plan/fidelity.hpp`). These are the only headers that parse
/// nlohmann/json; `disttrain/disttrain.hpp` and the part umbrellas leave them
/// out so that code that never reads or writes JSON does not pay for it
/// (docs/header_cost.md).
///
/// @snippet plan.cpp json_umbrella

#include "disttrain/core/json.hpp"

#include "disttrain/bind/json.hpp"
#include "disttrain/comm/json.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/exec/trace.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/plan/fidelity.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/reorder/json.hpp"
#include "disttrain/schedule/json.hpp"
#include "disttrain/sim/trace.hpp"
