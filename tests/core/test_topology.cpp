// The one rank numbering and its groups (core/topology.hpp), and the
// topology's JSON (core/json.hpp).
#include <algorithm>
#include <tuple>
#include <vector>

#include "disttrain/core/json.hpp"
#include "disttrain/core/topology.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::group_kind;
using disttrain::module_id;
using disttrain::module_role;
using disttrain::replica_id;
using disttrain::stage_id;
using disttrain::topology;
using disttrain::topology_coord;

namespace {

constexpr auto enc = module_role::encoder;
constexpr auto bb = module_role::backbone;
constexpr auto gen = module_role::generator;

topology paper_example() {
  // The paper's worked example: encoder DP=2 TP=2; backbone stages DP=3 TP=4; generator 4 GPUs.
  return topology({{"vit", enc, 2, 1, 2}, {"llm", bb, 4, 2, 3}, {"sd", gen, 1, 1, 4}});
}

topology_coord at(int m, int s, int d, int t) {
  return {module_id{m}, stage_id{s}, replica_id{d}, t};
}

// Brute force: coordinates in the documented nesting (module, stage, replica, tp_rank).
std::vector<topology_coord> enumerate(const topology& t) {
  std::vector<topology_coord> out;
  for (const module_id m : t.owning_modules()) {
    const auto& g = t.module(m);
    for (int p = 0; p < g.pp; ++p)
      for (int d = 0; d < g.dp; ++d)
        for (int k = 0; k < g.tp; ++k) out.push_back(at(m.value, p, d, k));
  }
  return out;
}

}  // namespace

TEST_CASE("topology: rank numbering is contiguous per module with TP innermost") {
  const topology t = paper_example();
  CHECK(t.world_size() == 4 + 24 + 4);
  CHECK(t.base(module_id{0}) == 0);
  CHECK(t.base(module_id{1}) == 4);
  CHECK(t.base(module_id{2}) == 28);
  CHECK(t.node(31, 8) == 3);
  CHECK(t.coord(5) == at(1, 0, 0, 1));
  CHECK(t.coord(16) == at(1, 1, 0, 0));  // 4 + 12: first rank of stage 1
  CHECK(t.coord(27) == at(1, 1, 2, 3));
  CHECK(t.coord(31) == at(2, 0, 3, 0));
  const auto all = enumerate(t);
  REQUIRE(static_cast<int>(all.size()) == t.world_size());
  for (int r = 0; r < t.world_size(); ++r) {
    CHECK(t.coord(r) == all[static_cast<std::size_t>(r)]);
    CHECK(t.rank(t.coord(r)) == r);
  }
  CHECK(t.find("llm") == module_id{1});
  DISTTRAIN_CHECK_ERROR((void)t.find("nope"), errc::invalid_argument, "topology.modules");
}

TEST_CASE("topology groups: paper example, by hand") {
  const topology t = paper_example();
  CHECK(t.tp_group(module_id{0}, stage_id{0}, replica_id{1}) == std::vector<int>{2, 3});
  CHECK(t.tp_group(module_id{1}, stage_id{0}, replica_id{2}) == std::vector<int>{12, 13, 14, 15});
  CHECK(t.pp_group(module_id{1}, replica_id{1}, 2) == std::vector<int>{10, 22});
  CHECK(t.dp_group(module_id{1}, stage_id{1}, 3) == std::vector<int>{19, 23, 27});
  CHECK(t.dp_group(module_id{2}, stage_id{0}, 0) == std::vector<int>{28, 29, 30, 31});
  CHECK(t.num_boundaries() == 2);
  const std::vector<int> b0{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  CHECK(t.boundary_group(0) == b0);
  const std::vector<int> b1{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
  CHECK(t.boundary_group(1) == b1);
  CHECK(t.boundary_group(module_id{2}, module_id{1}) ==
        std::vector<int>{28, 29, 30, 31, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  disttrain::require_tp_in_nodes(t, 8, "t");  // every TP group inside a node of 8
  for (int r = 0; r < t.world_size(); ++r) {
    const auto c = t.coord(r);
    for (const int q : t.tp_group(c.module, c.stage, c.replica))
      CHECK(t.node(q, 8) == t.node(r, 8));
  }
}

TEST_CASE("topology groups: TP/PP/DP partition the world; colors and keys match the lists") {
  const std::vector<topology> topologies = {
      paper_example(),
      topology({{"a", bb, 1, 3, 2}}),
      topology(
          {{"e1", enc, 2, 2, 1}, {"e2", enc, 1, 1, 3}, {"b", bb, 2, 3, 2}, {"g", gen, 4, 1, 1}}),
      // Colocated modules own no ranks and no groups; module ids skip them.
      topology({{"c", enc, 1, 1, 1, true, true},
                {"e", enc, 2, 1, 2},
                {"b", bb, 1, 2, 3},
                {"g", gen, 1, 1, 1, true, true}}),
  };
  for (const auto& t : topologies) {
    for (const group_kind k : {group_kind::tp, group_kind::pp, group_kind::dp}) {
      const auto groups = t.groups(k);
      std::vector<int> seen(static_cast<std::size_t>(t.world_size()), 0);
      for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& grp = groups[gi];
        CHECK(std::is_sorted(grp.begin(), grp.end()));
        for (std::size_t pos = 0; pos < grp.size(); ++pos) {
          const int r = grp[pos];
          ++seen[static_cast<std::size_t>(r)];
          CHECK(t.group_color(k, r) == static_cast<int>(gi));
          CHECK(t.group_rank(k, r) == static_cast<int>(pos));
          // Members share the coordinates the kind fixes.
          const auto c0 = t.coord(grp[0]);
          const auto c = t.coord(r);
          CHECK(c.module == c0.module);
          if (k == group_kind::tp)
            CHECK(std::tie(c.stage, c.replica) == std::tie(c0.stage, c0.replica));
          if (k == group_kind::pp)
            CHECK(std::tie(c.replica, c.tp_rank) == std::tie(c0.replica, c0.tp_rank));
          if (k == group_kind::dp)
            CHECK(std::tie(c.stage, c.tp_rank) == std::tie(c0.stage, c0.tp_rank));
        }
      }
      for (const int v : seen) CHECK(v == 1);
    }
    // Boundary membership agrees with boundary_colors.
    const auto bgroups = t.groups(group_kind::boundary);
    CHECK(static_cast<int>(bgroups.size()) == t.num_boundaries());
    for (int r = 0; r < t.world_size(); ++r) {
      std::vector<int> expect;
      for (std::size_t i = 0; i < bgroups.size(); ++i)
        if (std::find(bgroups[i].begin(), bgroups[i].end(), r) != bgroups[i].end())
          expect.push_back(static_cast<int>(i));
      CHECK(t.boundary_colors(r) == expect);
    }
  }
}

TEST_CASE("topology groups: a single-stage middle module belongs to two boundaries") {
  const topology t({{"e", enc, 1, 1, 1}, {"m", bb, 1, 1, 2}, {"g", gen, 1, 1, 1}});
  CHECK(t.boundary_colors(1) == std::vector<int>{0, 1});
  CHECK(t.boundary_colors(0) == std::vector<int>{0});
  CHECK(t.boundary_colors(3) == std::vector<int>{1});
  DISTTRAIN_CHECK_ERROR((void)t.group_color(group_kind::boundary, 1), errc::invalid_argument,
                        "group_color");
  DISTTRAIN_CHECK_ERROR((void)t.group_rank(group_kind::boundary, 1), errc::invalid_argument,
                        "group_rank");
}

TEST_CASE("topology: invalid topologies and queries name the field") {
  DISTTRAIN_CHECK_ERROR(topology(std::vector<disttrain::topology_module>{}), errc::invalid_argument,
                        "topology.modules");
  DISTTRAIN_CHECK_ERROR(topology({{"a", bb, 0, 1, 1}}), errc::invalid_argument,
                        "topology.modules[0].tp");
  DISTTRAIN_CHECK_ERROR(topology({{"a", bb, 1, 1, -1}}), errc::invalid_argument,
                        "topology.modules[0].dp");
  DISTTRAIN_CHECK_ERROR(topology({{"a", enc, 1, 1, 1}, {"a", bb, 1, 1, 1}}), errc::invalid_argument,
                        "topology.modules[1].name");
  DISTTRAIN_CHECK_ERROR(topology({{"", bb, 1, 1, 1}}), errc::invalid_argument,
                        "topology.modules[0].name");
  // Node placement: tp 3 does not divide 8 GPUs per node.
  DISTTRAIN_CHECK_ERROR(disttrain::require_tp_in_nodes(topology({{"a", bb, 3, 1, 1}}), 8, "t"),
                        errc::invalid_argument, "t.a.tp");
  // First rank 2 not a multiple of tp 4: a TP group would straddle nodes 0 and 1 at ranks 6..9.
  const topology straddles({{"a", enc, 1, 1, 2}, {"b", bb, 4, 1, 2}});
  DISTTRAIN_CHECK_ERROR(disttrain::require_tp_in_nodes(straddles, 8, "t"), errc::invalid_argument,
                        "t.b.tp");
  DISTTRAIN_CHECK_ERROR(disttrain::require_tp_in_nodes(straddles, 0, "t"), errc::invalid_argument,
                        "t.gpus_per_node");
  DISTTRAIN_CHECK_ERROR(topology({{"a", bb, 1 << 16, 1 << 16, 2}}), errc::invalid_argument,
                        "topology.modules[0]");
  const topology t = paper_example();
  DISTTRAIN_CHECK_ERROR((void)t.coord(32), errc::invalid_argument, "topology.rank");
  DISTTRAIN_CHECK_ERROR((void)t.coord(-1), errc::invalid_argument, "topology.rank");
  DISTTRAIN_CHECK_ERROR((void)t.rank(at(1, 2, 0, 0)), errc::invalid_argument, "topology.llm.stage");
  DISTTRAIN_CHECK_ERROR((void)t.rank(at(1, 0, 3, 0)), errc::invalid_argument,
                        "topology.llm.replica");
  DISTTRAIN_CHECK_ERROR((void)t.rank(at(0, 0, 0, 2)), errc::invalid_argument,
                        "topology.vit.tp_rank");
  DISTTRAIN_CHECK_ERROR((void)t.boundary_group(2), errc::invalid_argument, "topology.boundary");
  DISTTRAIN_CHECK_ERROR((void)t.boundary_group(module_id{1}, module_id{1}), errc::invalid_argument,
                        "topology.boundary");
  DISTTRAIN_CHECK_ERROR((void)t.node(0, 0), errc::invalid_argument, "topology.gpus_per_node");
  const topology colocated({{"c", enc, 1, 1, 1, true, true}, {"b", bb, 1, 1, 2}});
  DISTTRAIN_CHECK_ERROR((void)colocated.tp_group(module_id{0}, stage_id{0}, replica_id{0}),
                        errc::invalid_argument, "topology.modules[0]");
}

TEST_CASE("topology JSON: round trip, defaults, errors name the field") {
  const topology t({{"vit", enc, 2, 1, 2, false}, {"llm", bb, 4, 2, 3, true, false, {3, 5}}});
  const disttrain::json j = t;
  CHECK(j.at("modules").at(0).at("role") == "encoder");
  CHECK(j.at("modules").at(0).at("trainable") == false);
  CHECK_FALSE(j.at("modules").at(0).contains("layers"));
  CHECK(j.at("modules").at(1).at("layers") == disttrain::json{3, 5});
  CHECK(j.get<topology>() == t);
  const auto minimal = disttrain::parse_json(R"({"modules": [{"name": "x", "role": "backbone",
                                                 "dp": 2}]})")
                           .get<topology>();
  CHECK(minimal.world_size() == 2);
  CHECK(minimal.module(module_id{0}).tp == 1);
  CHECK(minimal.module(module_id{0}).trainable);
  DISTTRAIN_CHECK_ERROR(
      disttrain::parse_json(R"({"modules": [{"name": "x", "role": "backbone", "dp": "two"}]})")
          .get<topology>(),
      errc::parse_error, "topology.modules[0].dp");
  // A misspelt key is an error, not ignored.
  DISTTRAIN_CHECK_ERROR(
      disttrain::parse_json(R"({"modules": [{"name": "x", "role": "backbone", "dP": 2}]})")
          .get<topology>(),
      errc::parse_error, "topology.modules[0].dP");
  DISTTRAIN_CHECK_ERROR(
      disttrain::parse_json(R"({"modules": [{"name": "x", "role": "llm"}]})").get<topology>(),
      errc::invalid_argument, "topology.modules[0].role");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json(R"({"gpus": 8})").get<topology>(), errc::parse_error,
                        "topology.gpus");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json(R"({"modules": 3})").get<topology>(),
                        errc::parse_error, "topology.modules");
  // Validation after reading: two backbones.
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json(R"({"modules": [{"name": "a", "role": "backbone"},
                                                {"name": "b", "role": "backbone"}]})")
                            .get<topology>(),
                        errc::invalid_argument, "topology.modules");
}
