// Issue 13 item 4: plan disagreement between the two sides of a route is an
// error even without verify mode, also when both plans give every message
// the same byte count (swapped samples, a reshape, another split axis).
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "disttrain/comm/fault_backend.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain_catch.hpp"
#include "local_harness.hpp"
#include "route_cases.hpp"

using disttrain::activation_shape;
using disttrain::errc;
using disttrain::local_backend;
using disttrain::local_world;
using disttrain::route_options;
using disttrain::sample_placement;
using disttrain::split_axis;
using disttrain::topology;
using namespace std::chrono_literals;
using enum disttrain::module_role;

namespace {

struct side {
  sample_placement pa, pb;
  activation_shape shape;
  route_options opts;
};

// Runs the boundary route of `L` where rank r plans with `plan_of(r)`; every
// rank's buffers are sized by its own plan and filled with the reference
// data of the *sender's* inputs `ref`. Returns each rank's error text ("" if
// none) and whether its destination holds the reference bytes.
struct result {
  std::vector<std::string> errors;
  std::vector<bool> correct;
};
result run(const topology& L, const side& ref, const std::function<side(int)>& plan_of, bool verify,
           bool slow_sender = false) {
  local_world world(L.world_size(), {2000ms});
  result res{std::vector<std::string>(static_cast<std::size_t>(L.world_size())),
             std::vector<bool>(static_cast<std::size_t>(L.world_size()), true)};
  const disttrain::test::route_case rc{
      "ref",     L,       disttrain::test::at(0, 0), disttrain::test::at(1, 0), ref.pa, ref.pb,
      ref.shape, ref.opts};
  auto errors = disttrain::test::run_ranks(world, [&](local_backend& b) {
    const side mine = plan_of(b.rank());
    const auto plan = disttrain::plan_boundary_route(L, 0, mine.pa, mine.pb, mine.shape, mine.opts);
    auto bufs = disttrain::test::make_buffers(rc, b.rank());
    bufs.source.resize(static_cast<std::size_t>(plan.source_elements(b.rank())) *
                       mine.shape.elem_size);
    bufs.destination.resize(static_cast<std::size_t>(plan.destination_elements(b.rank())) *
                            mine.shape.elem_size);
    disttrain::buffer_pool pool;
    const disttrain::transfer_options opts{.tag = 5, .verify = verify, .timeout = 1000ms};
    if (slow_sender && b.rank() == 0) {
      // Every send of the sender posted 100 ms late: the payload comes only
      // after the receiver has seen (and rejected) the stamp before it.
      disttrain::fault_backend<local_backend> slow(b, {.rate = 1.0,
                                                       .kinds = {disttrain::fault_kind::delay},
                                                       .min_delay = 100ms,
                                                       .max_delay = 100ms});
      disttrain::run_route(slow, plan, bufs.source, bufs.destination, pool, opts);
    } else {
      disttrain::run_route(b, plan, bufs.source, bufs.destination, pool, opts);
    }
    res.correct[static_cast<std::size_t>(b.rank())] =
        disttrain::test::count_mismatches(rc, b.rank(), bufs) == 0;
  });
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (!errors[r]) continue;
    try {
      std::rethrow_exception(errors[r]);
    } catch (const disttrain::error& e) {
      res.errors[r] = std::string(to_string(e.code())) + ": " + e.what();
    } catch (const std::exception& e) {
      res.errors[r] = std::string("foreign: ") + e.what();
    }
  }
  return res;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("plan agreement without verify: same byte count, different plan -> error") {
  // 1 -> 1 (TP 1 -> 2, with the fan-out): ranks 0 | 1, 2.
  const topology L({{"a", encoder, 1, 1, 1}, {"b", backbone, 2, 1, 1}});
  const side ref{sample_placement({{0, 1, 2, 3}}),
                 sample_placement({{0, 1, 2, 3}}),
                 activation_shape{{4, 4, 4, 4}, 8, 4},
                 {}};
  struct variant {
    std::string name;
    side receiver;  // what ranks 1 and 2 plan with
  };
  const std::vector<variant> variants{
      {"swapped sample order", {ref.pa, sample_placement({{1, 0, 2, 3}}), ref.shape, ref.opts}},
      {"sender-side order", {sample_placement({{3, 2, 1, 0}}), ref.pb, ref.shape, ref.opts}},
      {"reshape (rows x hidden)", {ref.pa, ref.pb, activation_shape{{8, 8, 8, 8}, 4, 4}, ref.opts}},
      {"rows moved between samples",
       {ref.pa, ref.pb, activation_shape{{2, 6, 4, 4}, 8, 4}, ref.opts}},
      {"split axis", {ref.pa, ref.pb, ref.shape, {split_axis::rows, true}}},
  };
  for (const auto& v : variants) {
    INFO(v.name);
    const auto res = run(
        L, ref, [&](int r) { return r == 0 ? ref : v.receiver; }, false);
    CHECK(res.errors[0].empty());  // the sender cannot tell; its receivers can
    // Each receiver fails: from rank 0's stamp (plan disagreement), or,
    // where the other receiver found it first and its abort notice came
    // while this one still waited for rank 0's message, from that notice.
    // At least one of them names the disagreement.
    int told = 0;
    for (int r : {1, 2}) {
      const auto& e = res.errors[static_cast<std::size_t>(r)];
      INFO("rank " << r << ": " << e);
      CHECK(contains(e, "comm_error"));
      const bool own = contains(e, "plan disagreement") &&
                       contains(e, "rank " + std::to_string(r) + " <- rank 0");
      const bool notice = contains(e, "rank " + std::to_string(3 - r) +
                                          " aborted the route after its own error (comm_error)");
      CHECK((own || notice));
      told += own ? 1 : 0;
    }
    CHECK(told >= 1);
  }
  // Control: the same plan on every rank moves the bytes, verify on or off.
  for (const bool verify : {false, true}) {
    const auto res = run(
        L, ref, [&](int) { return ref; }, verify);
    for (std::size_t r = 0; r < 3; ++r) {
      CHECK(res.errors[r].empty());
      CHECK(res.correct[r]);
    }
  }
}

TEST_CASE("plan agreement: the receiver that rejects a stamp still takes the payload behind it") {
  // The sender cannot tell that its receiver disagreed: it must complete, not
  // time out, also when it posts the payload only after the receiver failed.
  const topology L({{"a", encoder, 1, 1, 1}, {"b", backbone, 1, 1, 1}});
  const side ref{sample_placement({{0, 1, 2}}),
                 sample_placement({{0, 1, 2}}),
                 activation_shape{{4, 4, 4}, 8, 4},
                 {}};
  const side swapped{ref.pa, sample_placement({{1, 0, 2}}), ref.shape, ref.opts};
  for (const bool verify : {false, true}) {
    INFO("verify " << verify);
    const auto res = run(
        L, ref, [&](int r) { return r == 0 ? ref : swapped; }, verify, true);
    CHECK(res.errors[0].empty());
    INFO("rank 1: " << res.errors[1]);
    CHECK(contains(res.errors[1], "comm_error"));
  }
}

TEST_CASE("plan agreement with verify: the shapes are named first, the stamp catches the rest") {
  const topology L({{"a", encoder, 1, 1, 1}, {"b", backbone, 1, 1, 1}});
  const side ref{
      sample_placement({{0, 1}}), sample_placement({{0, 1}}), activation_shape{{4, 4}, 8, 4}, {}};
  const side swapped{ref.pa, sample_placement({{1, 0}}), ref.shape, ref.opts};
  const auto res = run(
      L, ref, [&](int r) { return r == 0 ? ref : swapped; }, true);
  CHECK(contains(res.errors[1], "verify: shape mismatch"));
}

TEST_CASE("route_plan::fingerprint: equal inputs agree, every input changes it") {
  const topology L({{"a", encoder, 1, 1, 2}, {"b", backbone, 2, 1, 2}});
  const auto p = sample_placement::round_robin(4, 2);
  const activation_shape shape{{1, 2, 3, 4}, 8, 2};
  const auto base = disttrain::plan_boundary_route(L, 0, p, p, shape).fingerprint();
  CHECK(base == disttrain::plan_boundary_route(L, 0, p, p, shape).fingerprint());
  const std::vector<std::uint64_t> others{
      disttrain::plan_boundary_route(L, 0, sample_placement({{2, 0}, {1, 3}}), p, shape)
          .fingerprint(),
      disttrain::plan_boundary_route(L, 0, p, sample_placement({{0, 2}, {3, 1}}), shape)
          .fingerprint(),
      disttrain::plan_boundary_route(L, 0, p, p, activation_shape{{1, 2, 3, 5}, 8, 2})
          .fingerprint(),
      disttrain::plan_boundary_route(L, 0, p, p, activation_shape{{1, 2, 3, 4}, 16, 2})
          .fingerprint(),
      disttrain::plan_boundary_route(L, 0, p, p, activation_shape{{1, 2, 3, 4}, 8, 4})
          .fingerprint(),
      disttrain::plan_boundary_route(L, 0, p, p, shape, {split_axis::rows, true}).fingerprint(),
      disttrain::plan_boundary_route(L, 0, p, p, shape, {split_axis::hidden, false}).fingerprint(),
      disttrain::plan_boundary_route(topology({{"a", encoder, 1, 1, 2}, {"b", backbone, 1, 1, 2}}),
                                     0, p, p, shape)
          .fingerprint(),
  };
  for (std::size_t i = 0; i < others.size(); ++i) {
    INFO("variant " << i);
    CHECK(others[i] != base);
    for (std::size_t j = 0; j < i; ++j) CHECK(others[i] != others[j]);
  }
}
