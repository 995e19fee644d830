#pragma once
/// @file model.hpp
/// @brief Specs of models, clusters and data; presets; workloads (nvcc-safe).
///
/// JSON I/O is not included: `disttrain/model/json.hpp` (or `disttrain/json.hpp`).
#include "disttrain/model/architecture.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/distribution.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_shape.hpp"
#include "disttrain/model/module_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/model/sample.hpp"
#include "disttrain/model/scenario.hpp"
#include "disttrain/model/workload.hpp"
