#pragma once
/// @file disttrain.hpp
/// @brief Umbrella header: every part of disttrain (nvcc-safe); backends,
/// JSON and timeline outputs are included on their own.
///
/// Not included here (include them yourself where needed), so that a trainer
/// parses only what it uses (docs/header_cost.md):
/// - JSON I/O and the trace writers: `disttrain/json.hpp` (or a part's
///   `<part>/json.hpp`), so that code that never reads or writes JSON does not
///   parse nlohmann/json (docs/header_cost.md);
/// - host-only headers `disttrain/<part>/format.hpp` (they use fmt; include them
///   from `.cpp` files), so that this header compiles in `.cu` files too;
/// - the communicator backends: `disttrain/comm/local_backend.hpp` (in-process),
///   `disttrain/comm/mpi_backend.hpp` (target `disttrain::mpi`),
///   `disttrain/comm/nccl_backend.hpp` (`disttrain::nccl`), the fault-injecting
///   `disttrain/comm/fault_backend.hpp`, and the CUDA kernels
///   `disttrain/kernels/copy_blocks_cuda.hpp` (`disttrain::kernels`);
/// - the SVG timeline `disttrain/sim/svg.hpp`.
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
