#pragma once
/// @file reorder.hpp
/// @brief The microbatch reorderer: per-sample module costs, balancing of each
/// microbatch over every module's DP replicas, microbatch ordering against the
/// pipeline's iteration time, and the one sample map (docs/reorder.md).
/// Depends on core/ only; its adapters to the other parts (sample placements
/// for comm/'s routes, the simulator as an objective, cost-model sample
/// costs, options from a plan) are in `disttrain/bind.hpp`.
///
/// JSON I/O is not included: `disttrain/reorder/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/multimodal_cost.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/ordering.hpp"
#include "disttrain/reorder/partition.hpp"
#include "disttrain/reorder/pipeline_time.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/reorder/sample_meta.hpp"
