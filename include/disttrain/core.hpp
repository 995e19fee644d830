#pragma once
/// @file core.hpp
/// @brief Core vocabulary: version, error policy, JSON helpers (nvcc-safe).
#include "disttrain/core/check.hpp"
#include "disttrain/core/config.hpp"
#include "disttrain/core/error.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/version.hpp"
