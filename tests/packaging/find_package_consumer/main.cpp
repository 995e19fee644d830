// A downstream program: uses disttrain's core API through the umbrella header
// (nvcc-safe parts), linked against disttrain::disttrain alone: the umbrella
// must need neither Eigen nor fmt (main_calibration.cpp and main_format.cpp
// use those components). Exits non-zero on any mismatch, so the packaging
// tests fail if the package is broken.
#include <disttrain/disttrain.hpp>
#include <disttrain/json.hpp>

#include <cstdio>
#include <string>

namespace {
int failures = 0;
void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "FAILED: %s\n", what);
    ++failures;
  }
}
}  // namespace

int main() {
  static_assert(DISTTRAIN_VERSION == disttrain::version_major * 10000 +
                                         disttrain::version_minor * 100 + disttrain::version_patch);
  check(std::string(disttrain::version_string) == DISTTRAIN_VERSION_STRING, "version string");
#ifdef DISTTRAIN_PACKAGE_VERSION
  check(std::string(DISTTRAIN_PACKAGE_VERSION) == DISTTRAIN_VERSION_STRING,
        "CMake package version equals the headers' DISTTRAIN_VERSION_STRING");
#endif

  // Error policy: a bad value throws disttrain::error naming field and value.
  try {
    disttrain::require_positive(-3, "consumer.layers");
    check(false, "require_positive(-3) must throw");
  } catch (const disttrain::error& e) {
    check(e.code() == disttrain::errc::invalid_argument, "error code");
    check(e.where() == "consumer.layers", "error where");
    check(std::string(e.what()).find("-3") != std::string::npos, "error names the value");
  }

  // JSON helpers report the full path of a missing field.
  const auto j = disttrain::parse_json(R"({"model": {"layers": 32}})", "consumer.json");
  check(disttrain::json_get<int>(j.at("model"), "layers", "model") == 32, "json_get");
  try {
    (void)disttrain::json_get<int>(j.at("model"), "heads", "model");
    check(false, "missing field must throw");
  } catch (const disttrain::error& e) {
    check(e.code() == disttrain::errc::parse_error && e.where() == "model.heads", "json path");
  }

  if (failures == 0) std::printf("disttrain %s consumer: OK\n", disttrain::version_string);
  return failures == 0 ? 0 : 1;
}
