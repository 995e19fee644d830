#pragma once
// Fixture of packaging.optional_deps_detects: fmt outside a format.hpp.
#include <fmt/format.h>
