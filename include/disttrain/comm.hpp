#pragma once
/// @file comm.hpp
/// @brief Stage communicator: the `comm_backend` concept, buffers, sample
/// placements, route plans between differently parallelised stages and their
/// execution (nvcc-safe); each backend is included on its own.
///
/// The backends are separate headers, so a trainer parses only the one it
/// runs on: `disttrain/comm/local_backend.hpp` (in-process, ranks are
/// threads), `disttrain/comm/mpi_backend.hpp` (needs DISTTRAIN_HAS_MPI, target
/// disttrain::mpi), `disttrain/comm/nccl_backend.hpp` (DISTTRAIN_HAS_NCCL,
/// target disttrain::nccl) and the fault-injecting decorator
/// `disttrain/comm/fault_backend.hpp`.
///
/// JSON I/O is not included: `disttrain/comm/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/buffer.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/comm/route_plan.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain/kernels/copy_blocks.hpp"
