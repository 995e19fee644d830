// Conan test_package: the packaged headers, their dependencies (nlohmann_json
// for the core, Eigen for disttrain::calibration, fmt for disttrain::format)
// and the error policy work together in a consumer.
#include <disttrain/disttrain.hpp>

#include <cstdio>
#include <string>

#if defined(TEST_PACKAGE_FORMAT)
#include <fmt/format.h>
#include <disttrain/core/format.hpp>
#include <disttrain/json.hpp>
#endif
#if defined(TEST_PACKAGE_CALIBRATION)
#include <Eigen/Core>
#endif

int main() {
  int failures = 0;
  try {
    disttrain::require_in_range(9, 1, 8, "test_package.tp");
    ++failures;
  } catch (const disttrain::error& e) {
    if (e.code() != disttrain::errc::invalid_argument || e.where() != "test_package.tp") ++failures;
  }
  const auto j = disttrain::parse_json(R"({"tp": 8})", "test_package");
  if (j.at("tp").get<int>() != 8) ++failures;
#if defined(TEST_PACKAGE_FORMAT)
  if (fmt::format("{}", disttrain::errc::infeasible) != "infeasible") ++failures;
#endif
#if defined(TEST_PACKAGE_CALIBRATION)
  const Eigen::Vector2d v(3.0, 4.0);
  if (v.norm() != 5.0) ++failures;
#endif
  std::printf("disttrain %s test_package: %s\n", disttrain::version_string,
              failures == 0 ? "OK" : "FAILED");
  return failures == 0 ? 0 : 1;
}
