#pragma once
/// @file comm.hpp
/// @brief Stage communicator: the `comm_backend` concept, the in-process
/// backend, buffers, sample placements, route plans between differently
/// parallelised stages and their execution (nvcc-safe).
///
/// The MPI and NCCL backends are separate opt-in headers:
/// `disttrain/comm/mpi_backend.hpp` (needs DISTTRAIN_HAS_MPI, target
/// disttrain::mpi) and `disttrain/comm/nccl_backend.hpp` (DISTTRAIN_HAS_NCCL,
/// target disttrain::nccl).
///
/// JSON I/O is not included: `disttrain/comm/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/buffer.hpp"
#include "disttrain/comm/fault_backend.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/comm/route_plan.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain/plan/rank_layout.hpp"
