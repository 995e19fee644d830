#pragma once
// Fixture of packaging.part_layering_detects: an allowed header.
