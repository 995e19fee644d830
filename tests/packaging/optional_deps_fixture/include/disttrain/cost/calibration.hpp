#pragma once
// Fixture of packaging.optional_deps_detects: Eigen where it is allowed.
#include <Eigen/Dense>
