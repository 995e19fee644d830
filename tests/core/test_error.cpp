#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <string_view>
#include <variant>

#include "disttrain/core.hpp"
#include "disttrain/core/json.hpp"
#include "disttrain/core/visit_held.hpp"
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

TEST_CASE("require with a lazy location builds it only on failure") {
  int built = 0;
  const auto where = [&] {
    ++built;
    return disttrain::cat("samples[", 7, "]");
  };
  disttrain::require(true, where, "never read");
  CHECK(built == 0);
  DISTTRAIN_CHECK_ERROR(disttrain::require(false, where, "replica ", 3, " out of range"),
                        errc::invalid_argument, "samples[7]");
  CHECK(built == 1);
}

namespace {
// What cat printed when it streamed into an std::ostringstream with precision(10).
template <class... Ts>
std::string streamed(const Ts&... parts) {
  std::ostringstream os;
  os.precision(10);
  (os << ... << parts);
  return os.str();
}
}  // namespace

TEST_CASE("cat prints text, characters and numbers as a precision-10 stream did") {
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(disttrain::cat("a", 1, 'c', 2.5, 1e9, 1e10, 123456789012.0, 0.1, 1.0 / 3, -0.0, 1e-5) ==
        streamed("a", 1, 'c', 2.5, 1e9, 1e10, 123456789012.0, 0.1, 1.0 / 3, -0.0, 1e-5));
  CHECK(disttrain::cat(3.0F, 1e300, inf, -inf, 1e-320, 1.5L, 2.0F / 7.0F, 0.000123456789012) ==
        streamed(3.0F, 1e300, inf, -inf, 1e-320, 1.5L, 2.0F / 7.0F, 0.000123456789012));
  CHECK(disttrain::cat(std::numeric_limits<std::uint64_t>::max(),
                       std::int64_t{-9223372036854775807}, true, false, short{-3},
                       static_cast<unsigned short>(7)) ==
        streamed(std::numeric_limits<std::uint64_t>::max(), std::int64_t{-9223372036854775807},
                 true, false, short{-3}, static_cast<unsigned short>(7)));
  CHECK(disttrain::cat(std::string("s"), std::string_view("v"), "") == "sv");
  CHECK(disttrain::cat(std::nan("")) == streamed(std::nan("")));
  // Where cat and a stream differ, on purpose: 8-bit integers print as numbers,
  // a null C string as "(null)", and types with an ADL to_string through it.
  CHECK(disttrain::cat(std::uint8_t{65}, ' ', std::int8_t{-1}) == "65 -1");
  CHECK(disttrain::cat(static_cast<const char*>(nullptr)) == "(null)");
  CHECK(disttrain::cat("code ", errc::timeout) == "code timeout");
  CHECK(disttrain::cat() == "");
}

TEST_CASE("json helpers report missing and mistyped fields with their path") {
  auto j = disttrain::parse_json(R"({"layers": 32, "name": "x"})");
  CHECK(disttrain::json_get<int>(j, "layers", "model") == 32);
  CHECK(disttrain::json_get_or<int>(j, "heads", 7, "model") == 7);
  DISTTRAIN_CHECK_ERROR(disttrain::json_get<int>(j, "hidden", "model"), errc::parse_error,
                        "model.hidden");
  DISTTRAIN_CHECK_ERROR(disttrain::json_get<int>(j, "name", "model"), errc::parse_error,
                        "model.name");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json("{bad", "cfg.json"), errc::parse_error, "cfg.json");
}

namespace {
// Throws from its copy: assigning one into a variant that holds something
// else leaves the variant valueless.
struct throws_on_copy {
  throws_on_copy() = default;
  throws_on_copy(const throws_on_copy&) { throw 1; }
  throws_on_copy& operator=(const throws_on_copy&) = default;
};
}  // namespace

TEST_CASE("visit_held calls the function with the held alternative, as std::visit does") {
  using v3 = std::variant<int, std::string, double>;
  const auto name = [](const auto& x) -> std::string {
    if constexpr (std::is_same_v<std::decay_t<decltype(x)>, std::string>)
      return "string " + x;
    else
      return disttrain::cat(x);
  };
  for (const v3& v : {v3(7), v3(std::string("s")), v3(2.5)})
    CHECK(disttrain::visit_held(name, v) == std::visit(name, v));
  int calls = 0;
  disttrain::visit_held([&](const auto&) { ++calls; }, v3(1.0));  // void result
  CHECK(calls == 1);

  std::variant<int, throws_on_copy> v;
  const throws_on_copy t;
  CHECK_THROWS(v = t);
  REQUIRE(v.valueless_by_exception());
  DISTTRAIN_CHECK_ERROR(disttrain::visit_held([](const auto&) { return 0; }, v), errc::internal,
                        "visit_held");
}

TEST_CASE("version macros agree") {
  CHECK(DISTTRAIN_VERSION == disttrain::version_major * 10000 + disttrain::version_minor * 100 +
                                 disttrain::version_patch);
}
