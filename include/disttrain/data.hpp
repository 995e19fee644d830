#pragma once
/// @file data.hpp
/// @brief Disaggregated data preprocessing: bounded queues, producer threads
/// and producer ranks. (`data/jpeg.hpp` needs libturbojpeg and is not included
/// here: include it on its own with the `disttrain::jpeg` target.)
#include "disttrain/data/bounded_queue.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
#include "disttrain/data/producer_ranks.hpp"
#include "disttrain/data/sample_requests.hpp"
