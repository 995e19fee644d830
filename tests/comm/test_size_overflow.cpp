// Issue 13 item 3: sizes that overflow int64_t / size_t are invalid_argument
// errors naming the field, never wrapped counts (and never signed-overflow UB:
// this test runs clean under the asan preset's UBSan).
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "disttrain/comm/json.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/checked.hpp"
#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain_catch.hpp"

using disttrain::activation_shape;
using disttrain::errc;
using disttrain::route_options;
using disttrain::sample_placement;
using disttrain::split_axis;
using disttrain::topology;
using disttrain::kernels::copy_block;
using enum disttrain::module_role;

namespace {
constexpr std::int64_t p2(int e) { return std::int64_t{1} << e; }
constexpr std::int64_t i64max = std::numeric_limits<std::int64_t>::max();
}  // namespace

TEST_CASE("checked_mul / checked_add detect overflow of signed and unsigned types") {
  using disttrain::checked_add;
  using disttrain::checked_mul;
  CHECK(checked_mul(p2(31), p2(31), "x") == p2(62));
  CHECK(checked_mul(std::int64_t{-3}, std::int64_t{5}, "x") == -15);
  CHECK(checked_mul(std::int64_t{-1}, i64max, "x") == -i64max);
  DISTTRAIN_CHECK_ERROR(checked_mul(p2(40), p2(30), "f.hidden"), errc::invalid_argument,
                        "f.hidden");
  DISTTRAIN_CHECK_ERROR(
      checked_mul(std::int64_t{-1}, std::numeric_limits<std::int64_t>::min(), "m"),
      errc::invalid_argument, "m");
  DISTTRAIN_CHECK_ERROR(checked_mul(std::int64_t{-2}, p2(62) + 1, "m"), errc::invalid_argument,
                        "m");
  DISTTRAIN_CHECK_ERROR(checked_mul(std::size_t{4}, std::size_t{1} << 62, "bytes"),
                        errc::invalid_argument, "bytes");
  CHECK(checked_add(i64max - 1, std::int64_t{1}, "x") == i64max);
  DISTTRAIN_CHECK_ERROR(checked_add(i64max, std::int64_t{1}, "s"), errc::invalid_argument, "s");
  DISTTRAIN_CHECK_ERROR(
      checked_add(std::numeric_limits<std::int64_t>::min(), std::int64_t{-1}, "s"),
      errc::invalid_argument, "s");
  DISTTRAIN_CHECK_ERROR(checked_add(~std::size_t{0}, std::size_t{1}, "u"), errc::invalid_argument,
                        "u");
}

TEST_CASE(
    "route planning: rows 2^40 x hidden 2^30 is an error naming the field, not 0 or INT64_MIN") {
  const topology L({{"enc", encoder, 1, 1, 1}, {"llm", backbone, 2, 1, 1}});
  const auto p = sample_placement::round_robin(1, 1);
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_boundary_route(L, 0, p, p, activation_shape{{p2(40)}, p2(30), 2}),
      errc::invalid_argument, "activation_shape.hidden");
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_boundary_route(L, 0, p, p, activation_shape{{p2(40)}, p2(30), 2},
                                     route_options{split_axis::rows, false}),
      errc::invalid_argument, "activation_shape.hidden");
  // The sum of the rows overflows.
  const auto p3 = sample_placement::round_robin(3, 1);
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(
                            L, 0, p3, p3, activation_shape{{p2(62), p2(62), p2(62)}, 1, 1}),
                        errc::invalid_argument, "activation_shape.rows");
}

TEST_CASE("route planning: an element size of 2^62 does not wrap byte counts to 0") {
  const topology L({{"enc", encoder, 1, 1, 1}, {"llm", backbone, 1, 1, 1}});
  const auto p = sample_placement::round_robin(1, 1);
  const activation_shape huge{{4}, 1, std::size_t{1} << 62};
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(L, 0, p, p, huge), errc::invalid_argument,
                        "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR(huge.validate(), errc::invalid_argument, "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR((activation_shape{{0}, 1, ~std::size_t{0}}.validate()),
                        errc::invalid_argument, "activation_shape.elem_size");
  // 2^61 elements x 4 bytes = 2^63 bytes: one past the limit; 2^60 x 4 fits.
  DISTTRAIN_CHECK_ERROR((activation_shape{{p2(61)}, 1, 4}.validate()), errc::invalid_argument,
                        "activation_shape.elem_size");
  CHECK((activation_shape{{p2(60)}, 1, 4}.total_bytes()) == p2(62));
}

TEST_CASE("route planning: slice bounds of huge but valid sizes are exact (no n * k overflow)") {
  // 2^61 rows, TP 1 -> 8: slice k covers rows [k 2^58, (k+1) 2^58). Computing
  // n * (k + 1) directly overflows int64 for k = 7.
  const topology L({{"enc", encoder, 1, 1, 1}, {"llm", backbone, 8, 1, 1}});
  const auto p = sample_placement::round_robin(1, 1);
  const activation_shape shape{{p2(61)}, 1, 1};
  const auto plan =
      disttrain::plan_boundary_route(L, 0, p, p, shape, route_options{split_axis::rows, false});
  REQUIRE(plan.messages().size() == 8);
  std::int64_t next = 0;
  for (const auto& m : plan.messages()) {
    REQUIRE(m.pieces.size() == 1);
    CHECK(m.pieces[0].row0 == next);
    CHECK(m.pieces[0].rows == p2(58));
    CHECK(m.elements == p2(58));
    next += m.pieces[0].rows;
  }
  CHECK(next == p2(61));
  CHECK(plan.phase_elements(0) == p2(61));
  CHECK(plan.minimum_crossing_elements() == p2(61));
  CHECK(plan.source_elements(0) == p2(61));
  // Hidden split of a huge hidden size: 3 rows x 2^61 columns in 8 slices.
  const activation_shape wide{{3}, p2(61) - 1, 1};
  const auto plan_h =
      disttrain::plan_boundary_route(L, 0, p, p, wide, route_options{split_axis::hidden, false});
  std::int64_t cols = 0;
  for (const auto& m : plan_h.messages()) cols += m.pieces.at(0).cols;
  CHECK(cols == p2(61) - 1);
  // With the fan-out, 8 copies of 2^61 bytes do not fit: an error, not a wrap.
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_boundary_route(L, 0, p, p, shape, route_options{split_axis::rows, true}),
      errc::invalid_argument, "route.fan_out");
}

TEST_CASE("copy_blocks: extents, coalescing and byte counts that overflow are errors") {
  using disttrain::kernels::coalesce;
  using disttrain::kernels::copy_blocks_cpu;
  using disttrain::kernels::extent;
  // (2^33 - 1) * 2^31 + 2^31 = 2^64: wraps to 0 without checks.
  const std::vector<copy_block> big{{0, 0, p2(33), p2(31), p2(31), p2(31)}};
  DISTTRAIN_CHECK_ERROR(extent(big), errc::invalid_argument, "copy_block");
  DISTTRAIN_CHECK_ERROR(coalesce(big), errc::invalid_argument, "copy_block");
  const std::vector<copy_block> far{{i64max, 0, 1, 2, 2, 2}};
  DISTTRAIN_CHECK_ERROR(extent(far), errc::invalid_argument, "copy_block.src");
  // Task counts: i64max rows of one task each, then one more task; and rows
  // times tasks per row (2^62 rows of 3 chunks) overflows on its own.
  const std::vector<copy_block> two{{0, 0, i64max, 1, 1, 1}, {0, 0, 1, 1, 1, 1}};
  DISTTRAIN_CHECK_ERROR(disttrain::kernels::task_prefix(two), errc::invalid_argument,
                        "copy_block.tasks");
  const std::int64_t wide = 2 * disttrain::kernels::copy_chunk_elements + 1;
  const std::vector<copy_block> long_rows{{0, 0, p2(62), wide, wide, wide}};
  DISTTRAIN_CHECK_ERROR(disttrain::kernels::task_prefix(long_rows), errc::invalid_argument,
                        "copy_block.tasks");
  // Empty blocks have no tasks, however many rows they claim.
  const std::vector<copy_block> empty{{0, 0, i64max, 0, 1, 1}, {0, 0, 1, 0, 1, 1}};
  CHECK(disttrain::kernels::task_prefix(empty) == std::vector<std::int64_t>{0, 0, 0});
  // 4 elements x 2^62 bytes = 2^64 bytes: must not pass as 0 bytes.
  std::vector<std::byte> none;
  const std::vector<copy_block> four{{0, 0, 1, 4, 4, 4}};
  DISTTRAIN_CHECK_ERROR(copy_blocks_cpu(none, none, four, std::size_t{1} << 62),
                        errc::invalid_argument, "copy_blocks.elem_size");
  // Sane sizes still copy.
  std::vector<std::byte> a(16, std::byte{7}), b(16);
  copy_blocks_cpu(a, b, four, 4);
  CHECK(b == a);
}

TEST_CASE("activation_shape JSON: negative and out-of-range sizes are errors, not wrapped") {
  const auto get = [](const char* text) {
    return disttrain::parse_json(text).get<activation_shape>();
  };
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1], "hidden": 4, "elem_size": -2})"), errc::parse_error,
                        "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1], "hidden": 4, "elem_size": 2.5})"), errc::parse_error,
                        "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1], "hidden": 4, "elem_size": 18446744073709551616})"),
                        errc::parse_error, "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1], "hidden": 4, "elem_size": 18446744073709551615})"),
                        errc::invalid_argument, "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [4], "hidden": 1, "elem_size": 4611686018427387904})"),
                        errc::invalid_argument, "activation_shape.elem_size");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1], "hidden": 9223372036854775808, "elem_size": 2})"),
                        errc::parse_error, "activation_shape.hidden");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1099511627776], "hidden": 1073741824, "elem_size": 2})"),
                        errc::invalid_argument, "activation_shape.hidden");
  DISTTRAIN_CHECK_ERROR(get(R"({"rows": [1, -3], "hidden": 4, "elem_size": 2})"),
                        errc::invalid_argument, "activation_shape.rows[1]");
  CHECK(get(R"({"rows": [1, 3], "hidden": 4, "elem_size": 2})") == activation_shape{{1, 3}, 4, 2});
}
