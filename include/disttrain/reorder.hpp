#pragma once
/// @file reorder.hpp
/// @brief The microbatch reorderer: per-sample module costs, balancing of each
/// microbatch over every module's DP replicas, microbatch ordering against the
/// pipeline's iteration time, the one sample map, and its per-microbatch
/// `sample_placement`s for the communicator's routes (docs/reorder.md).
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/multimodal_cost.hpp"
#include "disttrain/reorder/options.hpp"
#include "disttrain/reorder/ordering.hpp"
#include "disttrain/reorder/partition.hpp"
#include "disttrain/reorder/pipeline_time.hpp"
#include "disttrain/reorder/placement.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/reorder/sample_meta.hpp"
#include "disttrain/reorder/sim_objective.hpp"
#include "disttrain/reorder/workload_cost.hpp"
