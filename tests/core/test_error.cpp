#include <string>

#include "disttrain/core.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;

TEST_CASE("error carries category, location and message") {
  disttrain::error e(errc::infeasible, "backbone/stage 3", "needs 90 GB, limit 80 GB");
  CHECK(e.code() == errc::infeasible);
  CHECK(e.where() == "backbone/stage 3");
  CHECK(std::string(e.what()) ==
        "disttrain: infeasible at backbone/stage 3: needs 90 GB, limit 80 GB");
}

TEST_CASE("require helpers name the field and the value") {
  DISTTRAIN_CHECK_ERROR(disttrain::require_positive(0, "model.layers"), errc::invalid_argument,
                        "model.layers");
  DISTTRAIN_CHECK_ERROR(disttrain::require_in_range(9, 1, 8, "tp"), errc::invalid_argument, "tp");
  try {
    disttrain::require_non_negative(-2.5, "bytes");
    FAIL("no throw");
  } catch (const disttrain::error& e) {
    CHECK(std::string(e.message()).find("-2.5") != std::string::npos);
  }
  CHECK_NOTHROW(disttrain::require_positive(1, "x"));
}

TEST_CASE("json helpers report missing and mistyped fields with their path") {
  auto j = disttrain::parse_json(R"({"layers": 32, "name": "x"})");
  CHECK(disttrain::detail::json_get<int>(j, "layers", "model") == 32);
  CHECK(disttrain::detail::json_get_or<int>(j, "heads", 7, "model") == 7);
  DISTTRAIN_CHECK_ERROR(disttrain::detail::json_get<int>(j, "hidden", "model"), errc::parse_error,
                        "model.hidden");
  DISTTRAIN_CHECK_ERROR(disttrain::detail::json_get<int>(j, "name", "model"), errc::parse_error,
                        "model.name");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json("{bad", "cfg.json"), errc::parse_error, "cfg.json");
}

TEST_CASE("version macros agree") {
  CHECK(DISTTRAIN_VERSION == disttrain::version_major * 10000 + disttrain::version_minor * 100 +
                                 disttrain::version_patch);
}
