#pragma once
// Fixture of packaging.part_layering_detects: reorder/ may not include comm/,
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/error.hpp"
// nor another part's internals (core/ is allowed, its detail/ is not).
#include "disttrain/core/detail/internal.hpp"
