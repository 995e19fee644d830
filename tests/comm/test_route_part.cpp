// A rank's part of a route (route_options::for_rank) is exactly the whole
// route's messages of that rank, byte for byte, with their whole-route
// indices; headers_only keeps every message but its pieces and blocks.
// Checked over random layouts (TP and DP ratios, PP stage routes, empty
// replicas, zero-row samples, both split axes, with and without fan-out,
// forward and backward).
#include <cstdint>
#include <string>
#include <vector>

#include "disttrain/comm/route.hpp"
#include "disttrain/core/rng.hpp"
#include "disttrain_catch.hpp"
#include "route_cases.hpp"

using disttrain::errc;
using disttrain::route_message;
using disttrain::route_options;
using disttrain::route_plan;
using disttrain::sample_placement;
using disttrain::topology;
using disttrain::test::at;
using enum disttrain::module_role;

namespace {

struct random_route {
  topology layout;
  disttrain::route_endpoint from, to;
  sample_placement pa, pb;
  disttrain::activation_shape shape;
  route_options opts;
  std::string name;
};

int draw(disttrain::splitmix64& g, int lo, int hi) {  // in [lo, hi]
  return lo + static_cast<int>(g.below(static_cast<std::uint64_t>(hi - lo + 1)));
}

// n samples on dp replicas: a random replica each (some replicas stay empty),
// in a random order inside each replica.
sample_placement random_placement(disttrain::splitmix64& g, int n, int dp) {
  std::vector<std::vector<int>> lists(static_cast<std::size_t>(dp));
  const int used = draw(g, 1, dp);  // replicas [0, used) hold samples; the rest are empty
  for (int s = 0; s < n; ++s) lists[static_cast<std::size_t>(draw(g, 0, used - 1))].push_back(s);
  for (auto& l : lists)
    for (std::size_t i = l.size(); i > 1; --i)
      std::swap(l[i - 1], l[static_cast<std::size_t>(draw(g, 0, static_cast<int>(i) - 1))]);
  return sample_placement(std::move(lists));
}

random_route make_route(std::uint64_t seed) {
  disttrain::splitmix64 g(seed);
  random_route c;
  const int tp_a = draw(g, 1, 4), dp_a = draw(g, 1, 5), pp_b = draw(g, 1, 2);
  const int tp_b = draw(g, 1, 4), dp_b = draw(g, 1, 5);
  c.layout = topology({{"a", encoder, tp_a, 1, dp_a}, {"b", backbone, tp_b, pp_b, dp_b}});
  const int n = draw(g, 0, 12);
  for (int s = 0; s < n; ++s)
    c.shape.rows.push_back(draw(g, 0, 4) == 0 ? 0 : draw(g, 1, 7));  // some samples have no rows
  c.shape.hidden = draw(g, 1, 9);
  c.shape.elem_size = 2;
  c.opts.split = draw(g, 0, 1) == 0 ? disttrain::split_axis::hidden : disttrain::split_axis::rows;
  c.opts.fan_out = draw(g, 0, 3) != 0;
  c.opts.backward = draw(g, 0, 1) == 1;
  const bool stage_route = pp_b == 2 && draw(g, 0, 1) == 1;
  disttrain::route_endpoint up = at(0, 0), down = at(1, 0);
  c.pa = random_placement(g, n, stage_route ? dp_b : dp_a);
  c.pb = stage_route ? c.pa : random_placement(g, n, dp_b);
  if (stage_route) up = at(1, 0), down = at(1, 1);
  // Backward: from the later stage to the earlier one, placements swapped.
  if (c.opts.backward) {
    c.from = down, c.to = up;
    std::swap(c.pa, c.pb);
  } else {
    c.from = up, c.to = down;
  }
  c.name = disttrain::cat("seed ", seed, ": tp ", tp_a, "->", tp_b, " dp ", dp_a, "->", dp_b,
                          stage_route ? " (stage route)" : "", " n ", n,
                          c.opts.backward ? " backward" : "");
  return c;
}

route_plan plan(const random_route& c, route_options o) {
  return disttrain::plan_route(c.layout, c.from, c.pa, c.to, c.pb, c.shape, o);
}

void check_same(const route_message& x, const route_message& y, bool blocks) {
  CHECK(x.src == y.src);
  CHECK(x.dst == y.dst);
  CHECK(x.phase == y.phase);
  CHECK(x.elements == y.elements);
  CHECK(x.index == y.index);
  if (blocks) {
    CHECK(x.pieces == y.pieces);
    CHECK(x.send_blocks == y.send_blocks);
    CHECK(x.recv_blocks == y.recv_blocks);
  }
}

}  // namespace

TEST_CASE("a rank's part of a route is the whole route's messages of that rank", "[route]") {
  int parts = 0, messages = 0;
  for (std::uint64_t seed = 1; seed <= 300; ++seed) {
    const random_route c = make_route(seed);
    INFO(c.name);
    const route_plan whole = plan(c, c.opts);
    REQUIRE(whole.total_messages() == static_cast<int>(whole.messages().size()));
    CHECK(whole.for_rank() == -1);
    for (std::size_t i = 0; i < whole.messages().size(); ++i) {
      CHECK(whole.messages()[i].index == static_cast<int>(i));
      CHECK(&whole.message(static_cast<int>(i)) == &whole.messages()[i]);
    }
    // Headers only: every message, without pieces or blocks.
    route_options h = c.opts;
    h.headers_only = true;
    const route_plan heads = plan(c, h);
    REQUIRE(heads.messages().size() == whole.messages().size());
    for (std::size_t i = 0; i < heads.messages().size(); ++i) {
      check_same(heads.messages()[i], whole.messages()[i], false);
      CHECK(heads.messages()[i].pieces.empty());
      CHECK(heads.messages()[i].send_blocks.empty());
    }
    CHECK(heads.fingerprint() == whole.fingerprint());
    CHECK(heads.ranks() == whole.ranks());

    for (int r = 0; r < c.layout.world_size(); ++r) {
      INFO("rank " << r);
      route_options o = c.opts;
      o.for_rank = r;
      const route_plan part = plan(c, o);
      CHECK(part.for_rank() == r);
      CHECK(part.total_messages() == whole.total_messages());
      CHECK(part.fingerprint() == whole.fingerprint());
      CHECK(part.slices() == whole.slices());
      CHECK(part.rank_info(r) == whole.rank_info(r));
      CHECK(part.source_elements(r) == whole.source_elements(r));
      CHECK(part.destination_elements(r) == whole.destination_elements(r));
      std::vector<const route_message*> want;
      for (const auto& m : whole.messages())
        if (m.src == r || m.dst == r) want.push_back(&m);
      REQUIRE(part.messages().size() == want.size());
      for (std::size_t i = 0; i < want.size(); ++i) {
        check_same(part.messages()[i], *want[i], true);
        CHECK(&part.message(want[i]->index) == &part.messages()[i]);
      }
      for (int phase = 0; phase < 2; ++phase) {
        const auto indices = [](const route_plan& p, const std::vector<int>& pos) {
          std::vector<int> out;
          for (int i : pos) out.push_back(p.messages()[static_cast<std::size_t>(i)].index);
          return out;
        };
        CHECK(indices(part, part.sends_of(r, phase)) == indices(whole, whole.sends_of(r, phase)));
        CHECK(indices(part, part.recvs_of(r, phase)) == indices(whole, whole.recvs_of(r, phase)));
      }
      // Another rank's message is not in this part: a clear error.
      for (const auto& m : whole.messages())
        if (m.src != r && m.dst != r) {
          DISTTRAIN_CHECK_ERROR(part.message(m.index), errc::invalid_argument,
                                "route_plan.message");
          break;
        }
      ++parts;
      messages += static_cast<int>(part.messages().size());
    }
  }
  CHECK(parts > 1000);
  CHECK(messages > 1000);
}

TEST_CASE("routes that share skeletons (one cache) are the routes planned alone", "[route]") {
  // bind plans a microbatch's routes through one detail::skeleton_cache: a
  // link's gradient route and the links between other stages with the same
  // placements take an earlier route's skeleton. Each route so planned must
  // be the one plan_routes plans alone, whole, headers only and per rank.
  using disttrain::route_field;
  using disttrain::split_axis;
  std::size_t routes = 0, skeletons = 0;
  for (std::uint64_t seed = 1; seed <= 120; ++seed) {
    disttrain::splitmix64 g(seed);
    const int tp_a = draw(g, 1, 4), dp_a = draw(g, 1, 4), tp_b = draw(g, 1, 4),
              dp_b = draw(g, 1, 4), n = draw(g, 0, 10);
    const topology L({{"a", encoder, tp_a, 1, dp_a}, {"b", backbone, tp_b, 3, dp_b}});
    const sample_placement pa = random_placement(g, n, dp_a);
    const sample_placement pb = random_placement(g, n, dp_b);
    const sample_placement pb_copy = pb;  // equal, another object
    disttrain::activation_shape s1{{}, draw(g, 1, 9), 2}, s2;
    for (int s = 0; s < n; ++s) s1.rows.push_back(draw(g, 0, 3) == 0 ? 0 : draw(g, 1, 7));
    s2 = s1;
    if (n > 0) s2.rows[static_cast<std::size_t>(draw(g, 0, n - 1))] += 1;
    disttrain::activation_shape s3 = s1;  // fewer columns than slices: some slices empty
    s3.hidden = 1;
    const std::vector<std::vector<route_field>> field_sets{
        {{s1, split_axis::hidden}},
        {{s1, split_axis::rows}},
        {{s2, split_axis::hidden}},
        {{s3, split_axis::hidden}},
        {{s1, split_axis::hidden}, {{s1.rows, 1, 8}, split_axis::rows}},
    };
    struct end {
      disttrain::route_endpoint at;
      const sample_placement* p;
    };
    // The boundary a -> b0 and the stage routes of b, each both ways.
    const std::vector<std::pair<end, end>> links{{{at(0, 0), &pa}, {at(1, 0), &pb}},
                                                 {{at(1, 0), &pb}, {at(1, 1), &pb}},
                                                 {{at(1, 1), &pb_copy}, {at(1, 2), &pb_copy}}};
    disttrain::detail::skeleton_cache cache;
    std::size_t planned = 0;
    for (int pass = 0; pass < 3; ++pass)  // whole, headers only, one rank's part
      for (const auto& fields : field_sets)
        for (const auto& [up, down] : links)
          for (const bool backward : {false, true}) {
            const auto [from, to] = backward ? std::pair{down, up} : std::pair{up, down};
            route_options o;
            o.backward = backward;
            o.fan_out = draw(g, 0, 3) != 0;
            o.headers_only = pass == 1;
            o.for_rank = pass == 2 ? draw(g, 0, L.world_size() - 1) : -1;
            INFO("seed " << seed << " pass " << pass << " fields " << fields.size() << " "
                         << (backward ? "backward" : "forward"));
            const auto shared = disttrain::detail::plan_routes_cached(L, from.at, *from.p, to.at,
                                                                      *to.p, fields, o, cache);
            const auto alone = disttrain::plan_routes(L, from.at, *from.p, to.at, *to.p, fields, o);
            REQUIRE(shared.size() == alone.size());
            for (std::size_t f = 0; f < alone.size(); ++f) {
              CHECK(shared[f].fingerprint() == alone[f].fingerprint());
              CHECK(shared[f].total_messages() == alone[f].total_messages());
              CHECK(shared[f].ranks() == alone[f].ranks());
              REQUIRE(shared[f].messages().size() == alone[f].messages().size());
              for (std::size_t i = 0; i < alone[f].messages().size(); ++i)
                check_same(shared[f].messages()[i], alone[f].messages()[i], true);
            }
            ++planned;
          }
    routes += planned;
    skeletons += cache.size();
    CHECK(cache.size() < planned);
  }
  // Shared: far fewer skeletons than routes (both stage routes of b and
  // their gradients share one per set of pieces).
  CHECK(skeletons * 3 < routes);
}

TEST_CASE("a rank's part: rank out of range and message lookups are named errors", "[route]") {
  const topology L({{"enc", encoder, 2, 1, 2}, {"llm", backbone, 2, 1, 3}});
  const auto p2 = sample_placement::round_robin(5, 2);
  const auto p3 = sample_placement::round_robin(5, 3);
  const disttrain::activation_shape shape{{1, 2, 3, 4, 5}, 8, 4};
  route_options o;
  o.for_rank = L.world_size();
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(L, 0, p2, p3, shape, o),
                        errc::invalid_argument, "route_options.for_rank");
  o.for_rank = -2;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_boundary_route(L, 0, p2, p3, shape, o),
                        errc::invalid_argument, "route_options.for_rank");
  const route_plan whole = disttrain::plan_boundary_route(L, 0, p2, p3, shape);
  DISTTRAIN_CHECK_ERROR(whole.message(whole.total_messages()), errc::invalid_argument,
                        "route_plan.message");
  DISTTRAIN_CHECK_ERROR(whole.message(-1), errc::invalid_argument, "route_plan.message");
}
