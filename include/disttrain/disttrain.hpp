#pragma once
/// @file disttrain.hpp
/// @brief Umbrella header: every nvcc-safe public part of disttrain.
///
/// Not included here (include them yourself where needed):
/// - JSON I/O and the trace writers: `disttrain/json.hpp` (or a part's
///   `<part>/json.hpp`), so that code that never reads or writes JSON does not
///   parse nlohmann/json (docs/header_cost.md);
/// - host-only headers `disttrain/<part>/format.hpp` (they use fmt; include them
///   from `.cpp` files), so that this header compiles in `.cu` files too;
/// - feature-gated backends: `disttrain/comm/mpi_backend.hpp` (target
///   `disttrain::mpi`), `disttrain/comm/nccl_backend.hpp` (`disttrain::nccl`),
///   `disttrain/kernels/copy_blocks_cuda.hpp` (`disttrain::kernels`).
///
/// @snippet bind.cpp umbrella

#include "disttrain/core.hpp"

#include "disttrain/bind.hpp"
#include "disttrain/comm.hpp"
#include "disttrain/cost.hpp"
#include "disttrain/data.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/model.hpp"
#include "disttrain/plan.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain/schedule.hpp"
#include "disttrain/sim.hpp"
