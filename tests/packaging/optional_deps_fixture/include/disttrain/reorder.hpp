#pragma once
// Fixture of packaging.optional_deps_detects: a part umbrella that reaches fmt.
#include "disttrain/reorder/planted.hpp"
