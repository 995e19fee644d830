// reorder_result -> sample_placement: hand-built instances, the mapping
// examples/tiny_mllm does by hand, routes planned from the placements, and
// bad input.
#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "disttrain/bind/placement.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::module_place;
using disttrain::reorder_result;
using disttrain::sample_placement;

namespace {

// 7 samples (ids 10..70), 2 modules with dp 2 and 3, 2 microbatches:
//   microbatch 0: ids 10, 30, 40, 70; microbatch 1: ids 20, 50, 60.
//   module 0: mb0 replica 0 = [70, 10], replica 1 = [40, 30]; mb1 r0 = [50], r1 = [60, 20]
//   module 1: mb0 r0 = [30], r1 = [10, 70], r2 = [40]; mb1 r0 = [], r1 = [20], r2 = [60, 50]
reorder_result hand_result() {
  reorder_result r;
  r.modules = 2;
  r.microbatches = 2;
  r.dp = {2, 3};
  // id, microbatch, (module 0 replica, offset), (module 1 replica, offset)
  const std::uint32_t rows[7][6] = {{10, 0, 0, 1, 1, 0}, {20, 1, 1, 1, 1, 0}, {30, 0, 1, 1, 0, 0},
                                    {40, 0, 1, 0, 2, 0}, {50, 1, 0, 0, 2, 1}, {60, 1, 1, 0, 2, 0},
                                    {70, 0, 0, 0, 1, 1}};
  for (const auto& x : rows) {
    disttrain::sample_place p;
    p.id = x[0];
    p.microbatch = x[1];
    p.module[0] = module_place{x[2], x[3]};
    p.module[1] = module_place{x[4], x[5]};
    r.samples.push_back(p);
  }
  disttrain::rebuild_cells(r);
  disttrain::validate(r);
  return r;
}

// What examples/tiny_mllm/dist_trainer.hpp (begin_iteration) does by hand.
sample_placement example_mapping(const reorder_result& map, std::size_t module, std::uint32_t j) {
  std::vector<std::uint32_t> members;
  for (std::uint32_t i = 0; i < map.samples.size(); ++i)
    if (map.samples[i].microbatch == j) members.push_back(i);
  std::map<std::uint32_t, int> local;
  for (std::size_t l = 0; l < members.size(); ++l) local[members[l]] = static_cast<int>(l);
  std::vector<std::vector<int>> lists(map.dp[module]);
  for (std::size_t r = 0; r < map.dp[module]; ++r)
    for (std::uint32_t idx : map.cell(module, r, j)) lists[r].push_back(local.at(idx));
  return sample_placement(std::move(lists));
}

}  // namespace

TEST_CASE("placement: hand-built result") {
  const reorder_result r = hand_result();
  // Local ids of microbatch 0: 10 -> 0, 30 -> 1, 40 -> 2, 70 -> 3; of microbatch 1: 20, 50, 60.
  CHECK(disttrain::microbatch_samples(r, 0) == std::vector<std::uint32_t>{0, 2, 3, 6});
  CHECK(disttrain::microbatch_samples(r, 1) == std::vector<std::uint32_t>{1, 4, 5});
  CHECK(disttrain::to_sample_placement(r, 0, 0) == sample_placement({{3, 0}, {2, 1}}));
  CHECK(disttrain::to_sample_placement(r, 1, 0) == sample_placement({{1}, {0, 3}, {2}}));
  CHECK(disttrain::to_sample_placement(r, 0, 1) == sample_placement({{1}, {2, 0}}));
  CHECK(disttrain::to_sample_placement(r, 1, 1) == sample_placement({{}, {0}, {2, 1}}));
  const auto rp = disttrain::placements_for_route(r, 1, 0, 1);
  CHECK(rp.samples == std::vector<std::uint32_t>{1, 4, 5});
  CHECK(rp.from == sample_placement({{1}, {2, 0}}));
  CHECK(rp.to == sample_placement({{}, {0}, {2, 1}}));
  const auto same = disttrain::placements_for_route(r, 0, 1, 1);  // a stage route: one placement
  CHECK(same.from == same.to);
  CHECK(same.to == sample_placement({{1}, {0, 3}, {2}}));
}

TEST_CASE("placement: equals the tiny_mllm hand mapping on reorderer output; routes agree") {
  std::mt19937_64 rng(9);
  disttrain::reorder_options o;
  o.modules = {{"encoder", 2}, {"backbone", 3}, {"generator", 4}};
  o.microbatches = 4;
  std::vector<disttrain::sample_meta> batch(90);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    batch[i].id = 7 * (batch.size() - i);  // ids not in input order
    for (std::size_t k = 0; k < 3; ++k) batch[i].cost[k] = static_cast<double>(1 + rng() % 50);
  }
  const reorder_result res = disttrain::reorderer<>(o).assign(batch);
  // TP 2 / 1 / 2, one stage each: ranks 0..3 encoder, 4..6 backbone, 7..14 generator.
  using disttrain::module_role;
  const disttrain::topology L({{"enc", module_role::encoder, 2, 1, 2},
                               {"llm", module_role::backbone, 1, 1, 3},
                               {"gen", module_role::generator, 2, 1, 4}});
  const auto rows_of = [](std::uint64_t id) { return static_cast<std::int64_t>(id % 11); };
  for (std::uint32_t j = 0; j < res.microbatches; ++j) {
    const auto mp = disttrain::microbatch_placements(res, j);
    CHECK(mp.samples == disttrain::microbatch_samples(res, j));
    REQUIRE(mp.module.size() == 3);
    for (std::size_t k = 0; k < 3; ++k) {
      CHECK(disttrain::to_sample_placement(res, k, j) == example_mapping(res, k, j));
      CHECK(mp.module[k] == example_mapping(res, k, j));
    }
    for (std::size_t b = 0; b < 2; ++b) {
      const auto rp = disttrain::placements_for_route(res, j, b, b + 1);
      CHECK(rp.samples == disttrain::microbatch_samples(res, j));
      CHECK(rp.from == example_mapping(res, b, j));
      CHECK(rp.to == example_mapping(res, b + 1, j));
      disttrain::activation_shape shape;
      for (std::uint32_t idx : rp.samples) shape.rows.push_back(rows_of(res.samples[idx].id));
      shape.hidden = 8;
      const auto plan =
          disttrain::plan_boundary_route(L, static_cast<int>(b), rp.from, rp.to, shape);
      // Every replica sends / receives exactly the rows of its cell's samples (read from the result).
      for (std::size_t side = 0; side < 2; ++side) {
        const std::size_t k = b + side;
        for (std::uint32_t r = 0; r < res.dp[k]; ++r) {
          std::int64_t rows = 0;
          for (std::uint32_t idx : res.cell(k, r, j)) rows += rows_of(res.samples[idx].id);
          const int rank =
              L.rank({disttrain::module_id{static_cast<int>(k)}, disttrain::stage_id{0},
                      disttrain::replica_id{static_cast<int>(r)}, 0});
          CHECK((side == 0 ? plan.source_elements(rank) : plan.destination_elements(rank)) ==
                rows * 8);
        }
      }
    }
  }
}

TEST_CASE("placement: bad input") {
  const reorder_result r = hand_result();
  DISTTRAIN_CHECK_ERROR(disttrain::to_sample_placement(r, 2, 0), errc::invalid_argument,
                        "to_sample_placement.module");
  DISTTRAIN_CHECK_ERROR(disttrain::to_sample_placement(r, 0, 2), errc::invalid_argument,
                        "to_sample_placement.microbatch");
  DISTTRAIN_CHECK_ERROR(disttrain::placements_for_route(r, 0, 5, 1), errc::invalid_argument,
                        "placements_for_route.from_module");
  DISTTRAIN_CHECK_ERROR(disttrain::placements_for_route(r, 0, 0, 2), errc::invalid_argument,
                        "placements_for_route.to_module");
  DISTTRAIN_CHECK_ERROR(disttrain::placements_for_route(r, 3, 0, 1), errc::invalid_argument,
                        "placements_for_route.microbatch");
  DISTTRAIN_CHECK_ERROR(disttrain::microbatch_placements(r, 2), errc::invalid_argument,
                        "microbatch_placements.microbatch");
  DISTTRAIN_CHECK_ERROR(disttrain::microbatch_samples(r, 7), errc::invalid_argument,
                        "microbatch_samples.microbatch");
  // An empty result, and cells that do not match the header.
  DISTTRAIN_CHECK_ERROR(disttrain::to_sample_placement(reorder_result{}, 0, 0),
                        errc::invalid_argument, "reorder_result.modules");
  reorder_result short_cells = r;
  short_cells.cell_begin.pop_back();
  DISTTRAIN_CHECK_ERROR(disttrain::to_sample_placement(short_cells, 0, 0), errc::invalid_argument,
                        "reorder_result.cell_begin");
  reorder_result bad_begin = r;
  bad_begin.cell_begin[1] = 100;
  DISTTRAIN_CHECK_ERROR(disttrain::to_sample_placement(bad_begin, 0, 0), errc::invalid_argument,
                        "reorder_result.module[0].replica[0].microbatch[0]");
  // Module 1 lists sample id 20 (microbatch 1) in microbatch 0 instead of id 30.
  reorder_result moved = r;
  std::replace(moved.cell_samples.begin() + moved.cell_begin[moved.cell_index(1, 0, 0)],
               moved.cell_samples.begin() + moved.cell_begin[moved.cell_index(1, 1, 0)], 2u, 1u);
  DISTTRAIN_CHECK_ERROR(disttrain::to_sample_placement(moved, 1, 0), errc::invalid_argument,
                        "reorder_result.module[1].microbatch[0]");
  DISTTRAIN_CHECK_ERROR(disttrain::placements_for_route(moved, 0, 0, 1), errc::invalid_argument,
                        "reorder_result.module[1].replica[0].microbatch[0]");
  // Module 1 loses a sample of microbatch 0 (a cell shortened, the rest shifted).
  reorder_result lost = r;
  const std::size_t c = lost.cell_index(1, 1, 0);  // [10, 70]
  lost.cell_samples.erase(lost.cell_samples.begin() + lost.cell_begin[c + 1] - 1);
  lost.cell_samples.push_back(0);
  for (std::size_t x = c + 1; x < lost.cell_begin.size() - 1; ++x) --lost.cell_begin[x];
  DISTTRAIN_CHECK_ERROR(disttrain::placements_for_route(lost, 0, 0, 1), errc::invalid_argument,
                        "reorder_result.module[1].microbatch[0]");
}
