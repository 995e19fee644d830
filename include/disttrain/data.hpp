#pragma once
/// @file data.hpp
/// @brief Disaggregated data preprocessing: bounded queues and producer pipelines.
#include "disttrain/data/bounded_queue.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
