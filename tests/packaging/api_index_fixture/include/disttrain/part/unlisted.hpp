#pragma once
// Fixture of packaging.api_index_detects: a public header missing from docs/api.md.
