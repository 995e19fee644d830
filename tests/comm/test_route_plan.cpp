#include <cstdint>
#include <map>
#include <set>
#include <tuple>
#include <vector>

#include "disttrain/comm/json.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain_catch.hpp"
#include "route_cases.hpp"

using disttrain::errc;
using disttrain::route_plan;
using disttrain::sample_placement;
using disttrain::topology;
using disttrain::test::at;
using disttrain::test::route_case;
using enum disttrain::module_role;

namespace {

route_plan plan_of(const route_case& c) {
  return disttrain::plan_route(c.layout, c.from, c.pa, c.to, c.pb, c.shape, c.opts);
}

// Independent coverage check: walks every piece of every message and marks
// the (sample, row, col) elements each receiver obtains; also checks that the
// sender of a phase-0 piece really holds the sample and the receiver needs it.
void check_coverage(const route_case& c, const route_plan& p) {
  const auto& L = c.layout;
  const auto& A = L.module(c.from.module);
  const auto& B = L.module(c.to.module);
  std::map<int, std::map<std::tuple<int, std::int64_t, std::int64_t>, int>>
      got;                                                             // rank -> element -> count
  std::map<std::tuple<int, std::int64_t, std::int64_t>, int> crossed;  // element -> count (phase 0)
  for (const auto& m : p.messages()) {
    std::int64_t e = 0;
    for (const auto& pc : m.pieces) {
      e += pc.elements();
      const auto cs = L.coord(m.src);
      const auto cd = L.coord(m.dst);
      CHECK(cd.module.value == c.to.module.value);
      CHECK(cd.stage.value == c.to.stage.value);
      CHECK(cd.replica.value == c.pb.replica_of(pc.sample));
      if (m.phase == 0) {
        CHECK(cs.module.value == c.from.module.value);
        CHECK(cs.stage.value == c.from.stage.value);
        CHECK(cs.replica.value == c.pa.replica_of(pc.sample));
      } else {
        CHECK(cs.module.value == c.to.module.value);
        CHECK(cs.replica.value == cd.replica.value);
      }
      for (std::int64_t r = pc.row0; r < pc.row0 + pc.rows; ++r)
        for (std::int64_t col = pc.col0; col < pc.col0 + pc.cols; ++col) {
          ++got[m.dst][{pc.sample, r, col}];
          if (m.phase == 0) ++crossed[{pc.sample, r, col}];
        }
    }
    CHECK(e == m.elements);
    CHECK(m.src != m.dst);
  }
  // Every element crosses exactly once.
  std::int64_t total = 0;
  for (std::size_t s = 0; s < c.shape.rows.size(); ++s) total += c.shape.rows[s] * c.shape.hidden;
  CHECK(static_cast<std::int64_t>(crossed.size()) == total);
  for (const auto& [k, n] : crossed) CHECK(n == 1);
  CHECK(p.phase_elements(0) == total);
  CHECK(p.minimum_crossing_elements() == total);
  // With fan-out, every receiving rank gets every element of its replica exactly once.
  if (c.opts.fan_out) {
    for (int b = 0; b < B.dp; ++b)
      for (int t = 0; t < B.tp; ++t) {
        const int r = L.rank({c.to.module, c.to.stage, disttrain::replica_id{b}, t});
        std::int64_t want = 0;
        for (int s : c.pb.samples(b))
          want += c.shape.rows[static_cast<std::size_t>(s)] * c.shape.hidden;
        CHECK(static_cast<std::int64_t>(got[r].size()) == want);
        for (const auto& [k, n] : got[r]) CHECK(n == 1);
      }
    CHECK(p.phase_elements(1) == total * (B.tp - 1));
  } else {
    CHECK(p.phase_elements(1) == 0);
  }
  // Load spread: with S = lcm slices, each sending TP rank of a replica sends S / TP_a slices per sample.
  (void)A;
}

}  // namespace

TEST_CASE(
    "every route case: each element crosses once, each receiver gets its replica exactly once") {
  auto cases = disttrain::test::local_route_cases();
  for (auto& c : disttrain::test::small_route_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    INFO("case " << c.name);
    const route_plan p = plan_of(c);
    check_coverage(c, p);
    // Buffer sizes per rank follow the placements.
    for (const auto& ri : p.ranks()) {
      const auto co = c.layout.coord(ri.rank);
      if (ri.src_rows >= 0) CHECK(ri.src_rows == c.shape.replica_rows(c.pa, co.replica.value));
      if (ri.dst_rows >= 0) CHECK(ri.dst_rows == c.shape.replica_rows(c.pb, co.replica.value));
    }
    // Determinism: recomputation gives the same messages.
    const route_plan q = plan_of(c);
    REQUIRE(q.messages().size() == p.messages().size());
    for (std::size_t i = 0; i < p.messages().size(); ++i) {
      CHECK(q.messages()[i].pieces == p.messages()[i].pieces);
      CHECK(q.messages()[i].send_blocks == p.messages()[i].send_blocks);
    }
    // Messages sorted by (phase, src, dst), one per pair.
    for (std::size_t i = 1; i < p.messages().size(); ++i) {
      const auto& a = p.messages()[i - 1];
      const auto& b = p.messages()[i];
      CHECK(std::tie(a.phase, a.src, a.dst) < std::tie(b.phase, b.src, b.dst));
    }
  }
}

TEST_CASE("hand-computed plan: 2 -> 3 replicas, TP 1 -> 2, hidden split") {
  // enc: 2 ranks (dp 2, tp 1) = ranks 0, 1; llm: dp 3, tp 2 = ranks 2..7.
  const topology L({{"enc", encoder, 1, 1, 2}, {"llm", backbone, 2, 1, 3}});
  // samples 0..3 with rows {2, 3, 1, 4}; placements: A: r0 {0, 2}, r1 {1, 3}; B: r0 {3}, r1 {0, 1}, r2 {2}.
  const sample_placement pa({{0, 2}, {1, 3}});
  const sample_placement pb({{3}, {0, 1}, {2}});
  const disttrain::activation_shape shape{{2, 3, 1, 4}, 4, 4};
  const auto p = disttrain::plan_boundary_route(L, 0, pa, pb, shape);
  CHECK(p.slices() == 2);
  // Phase 0 messages (src, dst): rank 0 holds samples 0, 2 -> sample 0 to llm r1 (ranks 4, 5),
  // sample 2 to llm r2 (ranks 6, 7); rank 1 holds 1, 3 -> sample 1 to r1 (4, 5), sample 3 to r0 (2, 3).
  std::vector<std::pair<int, int>> pairs;
  for (int i : p.sends_of(0, 0))
    pairs.emplace_back(p.messages()[static_cast<std::size_t>(i)].src,
                       p.messages()[static_cast<std::size_t>(i)].dst);
  CHECK(pairs == std::vector<std::pair<int, int>>{{0, 4}, {0, 5}, {0, 6}, {0, 7}});
  CHECK(p.sends_of(1, 0).size() == 4);  // -> 2, 3, 4, 5
  // Message 1 -> 4 carries slice 0 (cols 0..1) of sample 1 only.
  bool found = false;
  for (const auto& m : p.messages())
    if (m.phase == 0 && m.src == 1 && m.dst == 4) {
      found = true;
      REQUIRE(m.pieces.size() == 1);
      CHECK(m.pieces[0] == disttrain::route_piece{1, 0, 0, 3, 0, 2});
      // Sample 1 sits at row 0 of source replica 1 and row 2 (after sample 0) of destination replica 1.
      REQUIRE(m.send_blocks.size() == 1);
      CHECK(m.send_blocks[0] == disttrain::kernels::copy_block{0, 0, 3, 2, 4, 2});
      CHECK(m.recv_blocks[0] == disttrain::kernels::copy_block{0, 8, 3, 2, 2, 4});
      CHECK(m.elements == 6);
    }
  CHECK(found);
  // Buffers: rank 0 holds 3 rows (samples 0, 2), rank 4 receives 5 rows.
  CHECK(p.source_elements(0) == 12);
  CHECK(p.destination_elements(4) == 20);
  CHECK(p.destination_elements(0) == 0);
  CHECK(p.rank_info(1).dst_rows == -1);
  CHECK(p.recvs_of(4, 1) == p.recvs_of(4, 1));
  CHECK(p.recvs_of(4, 1).size() == 1);  // from rank 5
  // JSON summary.
  const disttrain::json j = p;
  CHECK(j.at("crossing_elements") == 40);
  CHECK(j.at("fan_out_elements") == 40);
}

TEST_CASE("row split of contiguous single pieces is zero copy") {
  const topology L({{"a", encoder, 1, 1, 1}, {"b", backbone, 1, 1, 1}});
  const auto p = disttrain::plan_boundary_route(
      L, 0, sample_placement::round_robin(3, 1), sample_placement::round_robin(3, 1),
      disttrain::activation_shape{{2, 5, 1}, 8, 2}, {disttrain::split_axis::rows, true});
  REQUIRE(p.messages().size() == 1);
  CHECK(p.messages()[0].contiguous_send());
  CHECK(p.messages()[0].contiguous_recv());
  CHECK(p.messages()[0].send_blocks[0] == disttrain::kernels::copy_block{0, 0, 1, 64, 64, 64});
}

TEST_CASE("route planning rejects inconsistent inputs naming the field") {
  const topology L({{"enc", encoder, 1, 1, 2}, {"llm", backbone, 2, 2, 3}});
  const auto p2 = sample_placement::round_robin(4, 2);
  const auto p3 = sample_placement::round_robin(4, 3);
  const disttrain::activation_shape shape{{1, 2, 3, 4}, 8, 4};
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(L, 0, p3, p3, shape), errc::invalid_argument,
                        "route.placement_a");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(L, 0, p2, p2, shape), errc::invalid_argument,
                        "route.placement_b");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(L, 1, p2, p3, shape), errc::invalid_argument,
                        "route.boundary");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_route(L, at(1, 0), p3, at(1, 0), p3, shape),
                        errc::invalid_argument, "route.to.stage");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_route(L, at(0, 0), p2, at(1, 1), p3, shape),
                        errc::invalid_argument, "route.to.stage");
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_stage_route(L, disttrain::module_id{1}, disttrain::stage_id{1}, p3, shape),
      errc::invalid_argument, "route.to.stage");
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_boundary_route(L, 0, p2, sample_placement::round_robin(5, 3), shape),
      errc::invalid_argument, "route.placement_b");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(
                            L, 0, p2, p3, disttrain::activation_shape{{1, -2, 3, 4}, 8, 4}),
                        errc::invalid_argument, "activation_shape.rows[1]");
  DISTTRAIN_CHECK_ERROR(
      disttrain::plan_boundary_route(L, 0, p2, p3, disttrain::activation_shape{{1, 2, 3, 4}, 0, 4}),
      errc::invalid_argument, "activation_shape.hidden");
  DISTTRAIN_CHECK_ERROR(sample_placement({{0, 1}, {1}}), errc::invalid_argument,
                        "sample_placement.replica[1][0]");
  DISTTRAIN_CHECK_ERROR(sample_placement({{0, 3}}), errc::invalid_argument,
                        "sample_placement.replica[0][1]");
  DISTTRAIN_CHECK_ERROR(sample_placement::from_replica_map(std::vector<int>{0, 2}, 2),
                        errc::invalid_argument, "sample_placement.replica_of[1]");
  CHECK_NOTHROW(
      disttrain::plan_stage_route(L, disttrain::module_id{1}, disttrain::stage_id{0}, p3, shape));
}

TEST_CASE("sample placement and shape JSON round trip") {
  const sample_placement p({{3, 1}, {}, {0, 2}});
  CHECK(p.replica_of(2) == 2);
  CHECK(p.position_of(1) == 1);
  const disttrain::json j = p;
  CHECK(j.get<sample_placement>() == p);
  const disttrain::activation_shape a{{4, 0, 9}, 16, 2};
  const disttrain::json ja = a;
  CHECK(ja.get<disttrain::activation_shape>() == a);
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json(R"({"rows": [1], "hidden": 0, "elem_size": 2})")
                            .get<disttrain::activation_shape>(),
                        errc::invalid_argument, "activation_shape.hidden");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json(R"({"replica": []})").get<sample_placement>(),
                        errc::parse_error, "sample_placement.replicas");
}

TEST_CASE("plan_routes: fields of one link share one message set, each moves its own elements") {
  using disttrain::route_field;
  using disttrain::split_axis;
  auto cases = disttrain::test::local_route_cases();
  for (auto& c : disttrain::test::small_route_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    INFO("case " << c.name);
    // The case's activation, position ids (one int64 per row, split by rows)
    // and a sequence length (one int32 per sample: only slice 0 of a hidden
    // split has it, so it alone would skip pairs).
    std::vector<route_field> fields{{c.shape, c.opts.split}};
    fields.push_back({{c.shape.rows, 1, 8}, split_axis::rows});
    fields.push_back(
        {{std::vector<std::int64_t>(c.shape.rows.size(), 1), 1, 4}, split_axis::hidden});
    const auto routes = disttrain::plan_routes(c.layout, c.from, c.pa, c.to, c.pb, fields, c.opts);
    REQUIRE(routes.size() == 3);
    for (std::size_t f = 0; f < routes.size(); ++f) {
      INFO("field " << f);
      auto cf = c;
      cf.shape = fields[f].shape;
      cf.opts.split = fields[f].split;
      check_coverage(cf, routes[f]);
      REQUIRE(routes[f].messages().size() == routes[0].messages().size());
      CHECK(routes[f].total_messages() == routes[0].total_messages());
      for (std::size_t i = 0; i < routes[0].messages().size(); ++i) {
        const auto& a = routes[0].messages()[i];
        const auto& b = routes[f].messages()[i];
        CHECK(std::tie(a.src, a.dst, a.phase, a.index) == std::tie(b.src, b.dst, b.phase, b.index));
      }
    }
    // Every message carries something, and every pair that some field alone
    // would use is a message.
    std::set<std::tuple<int, int, int>> pairs;
    for (std::size_t i = 0; i < routes[0].messages().size(); ++i) {
      std::int64_t e = 0;
      for (const auto& r : routes) e += r.messages()[i].elements;
      CHECK(e > 0);
      const auto& m = routes[0].messages()[i];
      pairs.insert({m.phase, m.src, m.dst});
    }
    for (const auto& f : fields) {
      auto o = c.opts;
      o.split = f.split;
      const route_plan alone =
          disttrain::plan_route(c.layout, c.from, c.pa, c.to, c.pb, f.shape, o);
      for (const auto& m : alone.messages()) CHECK(pairs.count({m.phase, m.src, m.dst}) == 1);
    }
    // A rank's part is the whole route's messages of that rank, per field.
    for (const auto& ri : routes[0].ranks()) {
      auto o = c.opts;
      o.for_rank = ri.rank;
      const auto part = disttrain::plan_routes(c.layout, c.from, c.pa, c.to, c.pb, fields, o);
      for (std::size_t f = 0; f < fields.size(); ++f) {
        std::vector<disttrain::route_message> mine;
        for (const auto& m : routes[f].messages())
          if (m.src == ri.rank || m.dst == ri.rank) mine.push_back(m);
        REQUIRE(part[f].messages().size() == mine.size());
        for (std::size_t i = 0; i < mine.size(); ++i) {
          CHECK(part[f].messages()[i].index == mine[i].index);
          CHECK(part[f].messages()[i].pieces == mine[i].pieces);
          CHECK(part[f].stamp(part[f].messages()[i]) == routes[f].stamp(mine[i]));
        }
      }
    }
    // One field is plan_route's route.
    const auto one = disttrain::plan_routes(c.layout, c.from, c.pa, c.to, c.pb,
                                            std::span(fields).first(1), c.opts);
    const route_plan p = plan_of(c);
    CHECK(one[0].fingerprint() == p.fingerprint());
    REQUIRE(one[0].messages().size() == p.messages().size());
    for (std::size_t i = 0; i < p.messages().size(); ++i)
      CHECK(one[0].messages()[i].pieces == p.messages()[i].pieces);
  }
}

TEST_CASE("plan_routes rejects no field and fields of different sample counts") {
  const topology L({{"enc", encoder, 1, 1, 2}, {"llm", backbone, 2, 2, 3}});
  const auto p2 = sample_placement::round_robin(4, 2);
  const auto p3 = sample_placement::round_robin(4, 3);
  const disttrain::activation_shape shape{{1, 2, 3, 4}, 8, 4};
  DISTTRAIN_CHECK_ERROR(disttrain::plan_routes(L, at(0, 0), p2, at(1, 0), p3, {}),
                        errc::invalid_argument, "route.fields");
  const std::vector<disttrain::route_field> bad{{shape}, {{{1, 2, 3}, 1, 8}}};
  DISTTRAIN_CHECK_ERROR(disttrain::plan_routes(L, at(0, 0), p2, at(1, 0), p3, bad),
                        errc::invalid_argument, "route.fields[1].rows");
  const std::vector<disttrain::route_field> neg{{shape}, {{{1, -2, 3, 4}, 1, 8}}};
  DISTTRAIN_CHECK_ERROR(disttrain::plan_routes(L, at(0, 0), p2, at(1, 0), p3, neg),
                        errc::invalid_argument, "route.fields[1].rows[1]");
}

TEST_CASE(
    "plan_routes: each field is the route make_route would plan alone (shared parts, "
    "a field without rows built cheaply)") {
  using disttrain::route_field;
  auto cases = disttrain::test::local_route_cases();
  for (auto& c : disttrain::test::small_route_cases()) cases.push_back(c);
  for (const auto& c : cases) {
    INFO("case " << c.name);
    const std::vector<route_field> fields{
        {{std::vector<std::int64_t>(c.shape.rows.size(), 0), 3, 2}},  // from field 1's route
        {c.shape, c.opts.split},                                      // builds the skeleton
        {{c.shape.rows, 1, 8}, disttrain::split_axis::rows}};         // shares it
    std::vector<int> parts{-1};
    const route_plan whole = plan_of(c);
    for (const auto& ri : whole.ranks()) parts.push_back(ri.rank);
    for (const int r : parts) {
      auto o = c.opts;
      o.for_rank = r;
      const auto routes = disttrain::plan_routes(c.layout, c.from, c.pa, c.to, c.pb, fields, o);
      for (std::size_t f = 0; f < fields.size(); ++f) {
        INFO("field " << f);
        o.split = fields[f].split;
        const route_plan want = disttrain::detail::make_route(
            c.layout, c.from, c.pa, c.to, c.pb, fields[f].shape, o,
            disttrain::detail::route_occupancy(c.layout, c.from, c.to, fields));
        const route_plan& got = routes[f];
        CHECK(got.fingerprint() == want.fingerprint());
        CHECK(got.total_messages() == want.total_messages());
        CHECK(got.slices() == want.slices());
        CHECK(got.ranks() == want.ranks());
        CHECK(got.hidden() == want.hidden());
        CHECK(got.elem_size() == want.elem_size());
        CHECK(got.minimum_crossing_elements() == want.minimum_crossing_elements());
        REQUIRE(got.messages().size() == want.messages().size());
        for (std::size_t i = 0; i < got.messages().size(); ++i) {
          const auto& a = got.messages()[i];
          const auto& b = want.messages()[i];
          CHECK(std::tie(a.src, a.dst, a.phase, a.index, a.elements) ==
                std::tie(b.src, b.dst, b.phase, b.index, b.elements));
          CHECK(a.pieces == b.pieces);
          CHECK(a.send_blocks == b.send_blocks);
          CHECK(a.recv_blocks == b.recv_blocks);
          CHECK(got.stamp(a) == want.stamp(b));
        }
      }
    }
  }
}
