#pragma once
// Fixture of packaging.api_index_detects: listed.
