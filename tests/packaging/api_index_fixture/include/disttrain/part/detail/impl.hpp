#pragma once
// Fixture of packaging.api_index_detects: detail headers need no row.
