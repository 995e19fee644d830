#pragma once
// Fixture of packaging.part_layering_detects: reorder/ may not include comm/.
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/core/error.hpp"
