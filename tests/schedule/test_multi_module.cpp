// The multi-module disaggregated pipeline: segments with their own DP degrees.
#include <algorithm>
#include <numeric>
#include <string>

#include "disttrain/schedule.hpp"
#include "disttrain/sim.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
multi_module_spec paper_like(int per_backbone_replica) {
  multi_module_spec spec;
  spec.segments = {{.name = "encoder", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "backbone", .pp = 4, .dp = 3},
                   {.name = "generator", .role = disttrain::module_role::generator, .pp = 1}};
  spec.num_microbatches = 3 * per_backbone_replica;
  return spec;
}
int count(const pipeline_schedule& s, std::size_t r, op_kind k) {
  int n = 0;
  for (const auto& o : s.ops[r]) n += o.kind == k ? 1 : 0;
  return n;
}
}  // namespace

TEST_CASE(
    "encoder DP 2, backbone DP 3: validates, routes each microbatch to its replicas, simulates") {
  const auto spec = paper_like(8);
  const auto s = add_grad_sync(add_communication(make_multi_module(spec)));
  REQUIRE(s.ranks.size() == 2u + 4u * 3u + 1u);
  const auto rep = validate_schedule(s);
  CHECK(rep.num_collectives == 6u);  // one bucket per stage
  // Rank numbering: encoder replicas 0-1, backbone stage 1 replicas 2-4, ...
  CHECK(s.ranks[0] == schedule_rank{0, 0, 0});
  CHECK(s.ranks[3] == schedule_rank{1, 1, 1});
  CHECK(s.ranks[14] == schedule_rank{2, 5, 0});
  for (std::size_t r = 0; r < s.ranks.size(); ++r) {
    const auto& info = s.ranks[r];
    const int dp = s.segments[static_cast<std::size_t>(info.segment)].dp;
    for (const auto& o : s.ops[r]) {
      if (o.microbatch >= 0) CHECK(o.microbatch % dp == info.replica);  // default round-robin
      if (o.kind == op_kind::send_act) {
        const auto& peer = s.ranks[static_cast<std::size_t>(o.peer)];
        const int peer_dp = s.segments[static_cast<std::size_t>(peer.segment)].dp;
        CHECK(peer.stage == info.stage + 1);
        CHECK(o.microbatch % peer_dp == peer.replica);
      }
    }
  }
  CHECK(count(s, 0, op_kind::forward) == 12);   // encoder replica 0: microbatches 0, 2, ..., 22
  CHECK(count(s, 2, op_kind::forward) == 8);    // backbone replica 0: 0, 3, ..., 21
  CHECK(count(s, 14, op_kind::forward) == 24);  // the generator takes all
  const auto res = simulate(s, table_durations::uniform(1, 2));
  const double work = 6.0 * 24 * 3;  // 6 stages x 24 microbatches x (F + B)
  CHECK(std::accumulate(res.busy.begin(), res.busy.end(), 0.0) == Approx(work));
  CHECK(res.iteration_time >= 24 * 3.0);                    // the generator alone does 72 s of work
  CHECK(res.bubble_fraction[14] < res.bubble_fraction[2]);  // the generator is the bottleneck
}

TEST_CASE("one segment reproduces 1F1B exactly") {
  for (int p : {2, 4}) {
    for (int m : {1, 3, 8}) {
      multi_module_spec spec;
      spec.segments = {{.name = "pipeline", .pp = p}};
      spec.num_microbatches = m;
      const auto s = make_multi_module(spec);
      const auto ref = make_1f1b(p, m);
      CHECK(s.ops == ref.ops);
    }
  }
}

TEST_CASE("frozen modules: no W, no grad sync, no B where nothing upstream trains") {
  auto spec = paper_like(4);
  spec.segments[0].trainable = false;  // frozen encoder (first): forward only
  spec.segments[2].trainable = false;  // frozen generator (last): B to feed the backbone, no W
  spec.split_backward = true;
  const auto s = add_grad_sync(add_communication(make_multi_module(spec)));
  CHECK_NOTHROW(validate_schedule(s));
  for (std::size_t r : {0u, 1u}) {
    CHECK(count(s, r, op_kind::backward) == 0);
    CHECK(count(s, r, op_kind::recv_grad) == 0);
    CHECK(count(s, r, op_kind::optimizer_step) == 0);
  }
  for (std::size_t r = 2; r < 5; ++r)
    CHECK(count(s, r, op_kind::send_grad) == 0);  // first backbone stage
  CHECK(count(s, 2, op_kind::weight) == 4);
  CHECK(count(s, 14, op_kind::backward) == 12);
  CHECK(count(s, 14, op_kind::weight) == 0);
  CHECK(count(s, 14, op_kind::grad_sync_start) == 0);
  const auto res = simulate(s, table_durations::uniform(1, 1, 1));
  CHECK(res.peak_activation_bytes[0] == 0.0);  // forward-only encoder keeps nothing for backward
  CHECK(res.iteration_time > 0.0);
}

TEST_CASE("multi-stage encoder, explicit replica mapping") {
  multi_module_spec spec;
  spec.segments = {{.name = "encoder", .role = disttrain::module_role::encoder, .pp = 2, .dp = 2},
                   {.name = "backbone", .pp = 2, .dp = 3}};
  spec.num_microbatches = 12;
  // Backbone replica r takes microbatches r, r+3, ...; send all of replica 0's to encoder replica 1.
  std::vector<int> enc(12);
  for (int mb = 0; mb < 12; ++mb) enc[static_cast<std::size_t>(mb)] = mb % 3 == 0 ? 1 : 0;
  spec.order = {{.replica_of = enc}, {}};
  const auto s = add_grad_sync(add_communication(make_multi_module(spec)));
  CHECK_NOTHROW(validate_schedule(s));
  CHECK(count(s, 1, op_kind::forward) == 4);  // encoder stage 0 replica 1
  CHECK(count(s, 0, op_kind::forward) == 8);
  CHECK(simulate(s, table_durations::uniform(1, 2)).iteration_time > 0.0);
}

TEST_CASE("bad multi-module specs name the field") {
  auto spec = paper_like(2);
  spec.segments[1].dp = 0;
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument,
                        "segments[1] (backbone).dp");
  spec = paper_like(2);
  spec.order.resize(1);
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument, "multi_module.order");
  spec.order.resize(spec.segments.size());
  spec.order[0].replica_of = {0, 1, 0};
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument,
                        "order[0] (encoder).replica_of");
  spec.order[0].replica_of = {0, 0, 0, 0, 0, 5};
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument, "replica_of[5]");
  spec.order[0].replica_of = {0, 0, 0, 0, 0, 0};
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument, "replica_of");
  spec.order[0] = {.max_inflight = -1};
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument, "order[0].max_inflight");
  spec = paper_like(1);
  spec.segments[0].dp = 4;
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument,
                        "segments[0] (encoder).dp");
  DISTTRAIN_CHECK_ERROR(make_multi_module(multi_module_spec{}), errc::invalid_argument,
                        "multi_module.segments");
}

TEST_CASE("a replica that skips a gradient bucket is rejected naming the stage") {
  const auto s = add_grad_sync(add_communication(make_multi_module(paper_like(2))));
  auto bad = s;
  auto& ops = bad.ops[3];  // backbone stage 1 replica 1
  ops.erase(std::remove_if(ops.begin(), ops.end(),
                           [](const schedule_op& o) {
                             return o.kind == op_kind::grad_sync_start ||
                                    o.kind == op_kind::grad_sync_finish;
                           }),
            ops.end());
  DISTTRAIN_CHECK_ERROR(validate_schedule(bad), errc::schedule_error, "stage 1 bucket 0");
}

TEST_CASE(
    "an interleaved backbone between an encoder and a generator: Megatron-LM's order on its "
    "ranks, every microbatch through every chunk in path order, validates") {
  for (const int enc_dp : {1, 2})
    for (const int P : {2, 3})
      for (const int V : {2, 3})
        for (const int per : {1, 2, 3})
          for (const bool frozen_enc : {false, true}) {
            multi_module_spec spec;
            spec.segments = {
                {.name = "encoder",
                 .role = disttrain::module_role::encoder,
                 .pp = 1,
                 .dp = enc_dp,
                 .trainable = !frozen_enc},
                {.name = "backbone", .pp = P},
                {.name = "generator", .role = disttrain::module_role::generator, .pp = 1}};
            spec.segments[1].chunks = V;
            spec.num_microbatches = P * per * enc_dp;
            INFO("enc dp " << enc_dp << " P " << P << " V " << V << " m " << spec.num_microbatches
                           << " frozen " << frozen_enc);
            const auto c = make_multi_module(spec);
            CHECK(c.num_chunks == V);
            CHECK(c.num_virtual_stages() == 1 + P * V + 1);
            // Virtual stages in path order: encoder, backbone chunk 0 stages
            // 0..P-1, chunk 1, ..., generator.
            CHECK(c.virtual_stage(1, 1) == 1 + P);
            CHECK(c.stage_chunk(1 + P) == std::pair<int, int>{1, 1});
            CHECK(c.virtual_stage(P + 1, 0) == 1 + P * V);
            // The backbone ranks run interleaved_ops, the encoder and generator one chunk.
            for (int i = 0; i < P; ++i) {
              const std::size_t r = static_cast<std::size_t>(enc_dp + i);
              interleaved_rank ir;
              ir.stages = P;
              ir.position = i;
              ir.chunks = V;
              ir.op_stage = 1 + i;
              for (int mb = 0; mb < spec.num_microbatches; ++mb) ir.microbatches.push_back(mb);
              ir.extra_warmup = V;  // one virtual stage (the generator) after the backbone
              CHECK(c.ops[r] == interleaved_ops(ir));
            }
            const auto s = add_grad_sync(add_communication(c));
            CHECK_NOTHROW(validate_schedule(s));
            const auto res = simulate(s, table_durations::uniform(1, 2));
            CHECK(res.iteration_time > 0);
          }
}

TEST_CASE("an interleaved segment: invalid combinations are located errors") {
  multi_module_spec spec;
  spec.segments = {{.name = "encoder", .role = disttrain::module_role::encoder, .pp = 1},
                   {.name = "backbone", .pp = 2}};
  spec.segments[1].chunks = 2;
  spec.num_microbatches = 3;
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument,
                        "multi_module.segments[1] (backbone) replica 0.num_microbatches");
  spec.num_microbatches = 4;
  spec.split_backward = true;
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument,
                        "multi_module.segments[1] (backbone).chunks");
  spec.split_backward = false;
  spec.segments[1].pp = 1;
  DISTTRAIN_CHECK_ERROR(make_multi_module(spec), errc::invalid_argument,
                        "multi_module.segments[1] (backbone).chunks");
}
