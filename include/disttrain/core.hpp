#pragma once
/// @file core.hpp
/// @brief Core vocabulary: version, error policy (nvcc-safe). The JSON helpers
/// are `disttrain/core/json.hpp` (in `disttrain/json.hpp`).
#include "disttrain/core/check.hpp"
#include "disttrain/core/config.hpp"
#include "disttrain/core/error.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain/core/version.hpp"
