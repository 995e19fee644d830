#include <algorithm>
#include <set>
#include <tuple>
#include <vector>

#include "disttrain/plan/json.hpp"
#include "disttrain/plan/rank_layout.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::group_kind;
using disttrain::rank_coord;
using disttrain::rank_layout;
using disttrain::replica_id;
using disttrain::segment_spec;
using disttrain::stage_id;

namespace {

rank_layout paper_example() {
  // The paper's worked example: encoder DP=2 TP=2; backbone stages DP=3 TP=4; generator 4 GPUs.
  return rank_layout(
      {{"vit", "encoder", 2, 1, 2}, {"llm", "backbone", 4, 2, 3}, {"sd", "generator", 1, 1, 4}}, 8);
}

// Brute-force: enumerate coordinates in the documented nesting (segment, stage, replica, tp_rank).
std::vector<rank_coord> enumerate(const rank_layout& L) {
  std::vector<rank_coord> out;
  for (int s = 0; s < L.num_segments(); ++s) {
    const auto& g = L.segment(s);
    for (int p = 0; p < g.pp; ++p)
      for (int d = 0; d < g.dp; ++d)
        for (int t = 0; t < g.tp; ++t) out.push_back({s, p, d, t});
  }
  return out;
}

}  // namespace

TEST_CASE("rank numbering is contiguous per segment with TP innermost") {
  const rank_layout L = paper_example();
  CHECK(L.world_size() == 4 + 24 + 4);
  CHECK(L.base(0) == 0);
  CHECK(L.base(1) == 4);
  CHECK(L.base(2) == 28);
  CHECK(L.num_nodes() == 4);
  CHECK(L.coord(5) == rank_coord{1, 0, 0, 1});
  CHECK(L.coord(16) == rank_coord{1, 1, 0, 0});  // 4 + 12: first rank of stage 1
  CHECK(L.coord(27) == rank_coord{1, 1, 2, 3});
  CHECK(L.coord(31) == rank_coord{2, 0, 3, 0});
  const auto all = enumerate(L);
  REQUIRE(static_cast<int>(all.size()) == L.world_size());
  for (int r = 0; r < L.world_size(); ++r) {
    CHECK(L.coord(r) == all[static_cast<std::size_t>(r)]);
    CHECK(L.rank(L.coord(r)) == r);
  }
  CHECK(L.segment_index("llm") == 1);
  DISTTRAIN_CHECK_ERROR(L.segment_index("nope"), errc::invalid_argument, "rank_layout.segments");
}

TEST_CASE("groups: paper example, by hand") {
  const rank_layout L = paper_example();
  CHECK(L.tp_group(0, stage_id{0}, replica_id{1}) == std::vector<int>{2, 3});
  CHECK(L.tp_group(1, stage_id{0}, replica_id{2}) == std::vector<int>{12, 13, 14, 15});
  CHECK(L.pp_group(1, replica_id{1}, 2) == std::vector<int>{10, 22});
  CHECK(L.dp_group(1, stage_id{1}, 3) == std::vector<int>{19, 23, 27});
  CHECK(L.dp_group(2, stage_id{0}, 0) == std::vector<int>{28, 29, 30, 31});
  std::vector<int> b0{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  CHECK(L.boundary_group(0) == b0);
  std::vector<int> b1{16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31};
  CHECK(L.boundary_group(1) == b1);
  CHECK(L.boundary_group(2, 1) ==
        std::vector<int>{28, 29, 30, 31, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15});
  for (int r = 0; r < L.world_size(); ++r) {
    // Nodes of 8: every TP group inside one node.
    for (int q :
         L.tp_group(L.coord(r).segment, stage_id{L.coord(r).stage}, replica_id{L.coord(r).replica}))
      CHECK(L.node(q) == L.node(r));
  }
}

TEST_CASE("TP/PP/DP groups partition the world; colors and keys match the lists") {
  const std::vector<rank_layout> layouts = {
      paper_example(),
      rank_layout({{"a", "", 1, 3, 2}}),
      rank_layout({{"e1", "encoder", 2, 2, 1},
                   {"e2", "encoder", 1, 1, 3},
                   {"b", "backbone", 2, 3, 2},
                   {"g", "generator", 4, 1, 1}}),
  };
  for (const auto& L : layouts) {
    for (group_kind k : {group_kind::tp, group_kind::pp, group_kind::dp}) {
      const auto groups = L.groups(k);
      std::vector<int> seen(static_cast<std::size_t>(L.world_size()), 0);
      for (std::size_t gi = 0; gi < groups.size(); ++gi) {
        const auto& grp = groups[gi];
        CHECK(std::is_sorted(grp.begin(), grp.end()));
        for (std::size_t pos = 0; pos < grp.size(); ++pos) {
          const int r = grp[pos];
          ++seen[static_cast<std::size_t>(r)];
          CHECK(L.group_color(k, r) == static_cast<int>(gi));
          CHECK(L.group_rank(k, r) == static_cast<int>(pos));
          // Members share the coordinates the kind fixes.
          const auto c0 = L.coord(grp[0]);
          const auto c = L.coord(r);
          CHECK(c.segment == c0.segment);
          if (k == group_kind::tp)
            CHECK(std::tie(c.stage, c.replica) == std::tie(c0.stage, c0.replica));
          if (k == group_kind::pp)
            CHECK(std::tie(c.replica, c.tp_rank) == std::tie(c0.replica, c0.tp_rank));
          if (k == group_kind::dp)
            CHECK(std::tie(c.stage, c.tp_rank) == std::tie(c0.stage, c0.tp_rank));
        }
      }
      for (int v : seen) CHECK(v == 1);
    }
    // Boundary membership agrees with boundary_colors.
    const auto bgroups = L.groups(group_kind::boundary);
    CHECK(static_cast<int>(bgroups.size()) == L.num_boundaries());
    for (int r = 0; r < L.world_size(); ++r) {
      std::vector<int> expect;
      for (std::size_t i = 0; i < bgroups.size(); ++i)
        if (std::find(bgroups[i].begin(), bgroups[i].end(), r) != bgroups[i].end())
          expect.push_back(static_cast<int>(i));
      CHECK(L.boundary_colors(r) == expect);
    }
  }
}

TEST_CASE("single-stage middle segment belongs to two boundaries") {
  const rank_layout L({{"e", "", 1, 1, 1}, {"m", "", 1, 1, 2}, {"g", "", 1, 1, 1}});
  CHECK(L.boundary_colors(1) == std::vector<int>{0, 1});
  CHECK(L.boundary_colors(0) == std::vector<int>{0});
  CHECK(L.boundary_colors(3) == std::vector<int>{1});
  DISTTRAIN_CHECK_ERROR(L.group_color(group_kind::boundary, 1), errc::invalid_argument,
                        "group_color");
}

TEST_CASE("invalid layouts name the field") {
  DISTTRAIN_CHECK_ERROR(rank_layout(std::vector<segment_spec>{}), errc::invalid_argument,
                        "rank_layout.segments");
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 0, 1, 1}}), errc::invalid_argument,
                        "rank_layout.a.tp");
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 1, 1, -1}}), errc::invalid_argument,
                        "rank_layout.a.dp");
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 1, 1, 1}, {"a", "", 1, 1, 1}}),
                        errc::invalid_argument, "segments[1].name");
  DISTTRAIN_CHECK_ERROR(rank_layout({{"", "", 1, 1, 1}}), errc::invalid_argument,
                        "segments[0].name");
  // tp 3 does not divide 8 GPUs per node.
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 3, 1, 1}}, 8), errc::invalid_argument,
                        "rank_layout.a.tp");
  // Base 2 not a multiple of tp 4: TP group would straddle nodes 0 and 1 at ranks 6..9.
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 1, 1, 2}, {"b", "", 4, 1, 2}}, 8),
                        errc::invalid_argument, "rank_layout.b.tp");
  CHECK_NOTHROW(
      rank_layout({{"a", "", 1, 1, 2}, {"b", "", 4, 1, 2}}));  // fine without node constraint
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 1 << 16, 1 << 16, 2}}), errc::invalid_argument,
                        "rank_layout.a");
  const rank_layout L = paper_example();
  DISTTRAIN_CHECK_ERROR(L.coord(32), errc::invalid_argument, "rank_layout.rank");
  DISTTRAIN_CHECK_ERROR(L.coord(-1), errc::invalid_argument, "rank_layout.rank");
  DISTTRAIN_CHECK_ERROR(L.rank(1, 2, 0, 0), errc::invalid_argument, "rank_layout.llm.stage");
  DISTTRAIN_CHECK_ERROR(L.rank(1, 0, 3, 0), errc::invalid_argument, "rank_layout.llm.replica");
  DISTTRAIN_CHECK_ERROR(L.rank(0, 0, 0, 2), errc::invalid_argument, "rank_layout.vit.tp_rank");
  DISTTRAIN_CHECK_ERROR(L.boundary_group(2), errc::invalid_argument, "rank_layout.boundary");
  DISTTRAIN_CHECK_ERROR(rank_layout({{"a", "", 1, 1, 1}}).node(0), errc::invalid_argument,
                        "gpus_per_node");
}

TEST_CASE("rank layout JSON round trip and checks") {
  const rank_layout L = paper_example();
  const disttrain::json j = L;
  CHECK(j.at("world_size") == 32);
  CHECK(j.at("segments").at(1).at("base") == 4);
  const auto back = j.get<rank_layout>();
  CHECK(back == L);
  auto bad = j;
  bad["world_size"] = 31;
  DISTTRAIN_CHECK_ERROR(bad.get<rank_layout>(), errc::invalid_argument, "rank_layout.world_size");
  auto bad_base = j;
  bad_base["segments"][2]["base"] = 27;
  DISTTRAIN_CHECK_ERROR(bad_base.get<rank_layout>(), errc::invalid_argument, "rank_layout.sd.base");
  const auto minimal =
      disttrain::parse_json(R"({"segments": [{"name": "x", "dp": 2}]})").get<rank_layout>();
  CHECK(minimal.world_size() == 2);
  CHECK(minimal.segment(0).tp == 1);
  DISTTRAIN_CHECK_ERROR(
      disttrain::parse_json(R"({"segments": [{"name": "x", "dp": "two"}]})").get<rank_layout>(),
      errc::parse_error, "segments.x.dp");
  // A misspelt key is an error (it was ignored: the segment kept dp 1).
  DISTTRAIN_CHECK_ERROR(
      disttrain::parse_json(R"({"segments": [{"name": "x", "dP": 2}]})").get<rank_layout>(),
      errc::parse_error, "segments.x.dP");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json(R"({"gpus": 8})").get<rank_layout>(),
                        errc::parse_error, "rank_layout.segments");
  const auto gj = disttrain::groups_to_json(L);
  CHECK(gj.at("tp").size() == 2 + 6 + 4);
  CHECK(gj.at("boundary").size() == 2);
  const disttrain::json cj = rank_coord{1, 2, 3, 4};
  CHECK(cj.get<rank_coord>() == rank_coord{1, 2, 3, 4});
}
