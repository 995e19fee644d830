// Generators: op orders against hand-written sequences and published formulas.
#include <string>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/schedule/json.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
// "F0 F1 B0 ..." of the compute ops of one rank (chunk shown as c<k> when > 0).
std::string compute_order(const pipeline_schedule& s, int rank) {
  std::string out;
  for (const auto& o : s.ops[static_cast<std::size_t>(rank)]) {
    if (!is_compute(o.kind) || o.kind == op_kind::optimizer_step) continue;
    if (!out.empty()) out += ' ';
    out += std::string(to_string(o.kind)) + std::to_string(o.microbatch);
    if (o.chunk > 0) out += "c" + std::to_string(o.chunk);
  }
  return out;
}
int forwards_before_first_backward(const pipeline_schedule& s, int rank) {
  int n = 0;
  for (const auto& o : s.ops[static_cast<std::size_t>(rank)]) {
    if (o.kind == op_kind::backward) break;
    n += o.kind == op_kind::forward ? 1 : 0;
  }
  return n;
}
}  // namespace

TEST_CASE("1F1B orders match the hand-written schedule") {
  const auto s = make_1f1b(4, 8);
  CHECK(compute_order(s, 0) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7");
  CHECK(compute_order(s, 3) == "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 F6 B6 F7 B7");
  CHECK(compute_order(make_1f1b(4, 2), 0) == "F0 F1 B0 B1");  // fewer microbatches than stages
}

TEST_CASE("GPipe holds m activations, 1F1B holds p - s") {
  for (int p : {2, 4, 6}) {
    for (int m : {p, 2 * p + 1}) {
      const auto g = validate_schedule(add_communication(make_gpipe(p, m)));
      const auto f = validate_schedule(add_communication(make_1f1b(p, m)));
      for (int r = 0; r < p; ++r) {
        CHECK(g.peak_inflight[static_cast<std::size_t>(r)] == m);
        CHECK(f.peak_inflight[static_cast<std::size_t>(r)] == std::min(p - r, m));
      }
    }
  }
}

TEST_CASE("interleaved 1F1B: Megatron's warm-up counts and chunk order") {
  const int p = 4, v = 2, m = 8;
  const auto s = make_interleaved_1f1b(p, m, v);
  for (int r = 0; r < p; ++r)
    CHECK(forwards_before_first_backward(s, r) ==
          (p - r - 1) * 2 + (v - 1) * p + 1);  // warm-up + first steady F
  // Rank 0 runs microbatches 0..3 on chunk 0, then 0..3 on chunk 1, then 4..7 on chunk 0 ...
  // (10 warm-up forwards, then F6 B0c1 F7 B1c1 ...).
  CHECK(compute_order(s, 0).substr(0, 63) ==
        "F0 F1 F2 F3 F0c1 F1c1 F2c1 F3c1 F4 F5 F6 B0c1 F7 B1c1 F4c1 B2c1");
  // Backwards start from the last chunk.
  const auto& ops = s.ops[3];
  auto it = std::find_if(ops.begin(), ops.end(),
                         [](const schedule_op& o) { return o.kind == op_kind::backward; });
  REQUIRE(it != ops.end());
  CHECK(it->chunk == v - 1);
  CHECK(it->microbatch == 0);
  // m == p: all forwards first.
  CHECK(forwards_before_first_backward(make_interleaved_1f1b(4, 4, 2), 3) == 8);
  CHECK(interleaved_warmup(4, 3, 4, 2) == 8);
  CHECK(interleaved_warmup(4, 0, 8, 3) == 14);
}

TEST_CASE("interleaved 1F1B rejects microbatch counts that do not fit the group") {
  DISTTRAIN_CHECK_ERROR(make_interleaved_1f1b(4, 6, 2), errc::invalid_argument,
                        "interleaved.num_microbatches");
  try {
    (void)make_interleaved_1f1b(4, 6, 2);
  } catch (const error& e) {
    CHECK(std::string(e.message()).find("multiple of the pipeline size 4") != std::string::npos);
    CHECK(std::string(e.message()).find("4 or 8") != std::string::npos);
  }
  DISTTRAIN_CHECK_ERROR(make_interleaved_1f1b(4, 8, 1), errc::invalid_argument,
                        "interleaved.num_chunks");
  DISTTRAIN_CHECK_ERROR(make_1f1b(0, 8), errc::invalid_argument, "1f1b.num_stages");
  DISTTRAIN_CHECK_ERROR(make_gpipe(2, 0), errc::invalid_argument, "gpipe.num_microbatches");
}

TEST_CASE("ZB-H1 defers W by the stage index and keeps 1F1B's peak") {
  const auto s = make_zb_h1(4, 8);
  CHECK(s.split_backward);
  CHECK(compute_order(s, 0) ==
        "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 F6 B3 W3 F7 B4 W4 B5 W5 B6 W6 B7 W7");
  CHECK(compute_order(s, 3) ==
        "F0 B0 F1 B1 F2 B2 F3 B3 W0 F4 B4 W1 F5 B5 W2 F6 B6 W3 F7 B7 W4 W5 W6 W7");
  for (int p : {2, 3, 5}) {
    for (int m : {1, p, 3 * p}) {
      const auto z = validate_schedule(add_communication(make_zb_h1(p, m)));
      const auto f = validate_schedule(add_communication(make_1f1b(p, m)));
      CHECK(z.max_peak_inflight() == f.max_peak_inflight());
    }
  }
}

TEST_CASE("ZB-H1 ops of a stage without W run 1F1B's order, without B forwards only") {
  const auto f = make_1f1b(4, 8);
  for (int r = 0; r < 4; ++r) {
    const auto frozen =
        zb_h1_ops({.stages = 4, .position = r, .microbatches = 8, .op_stage = r, .weight = false});
    CHECK(frozen == f.ops[static_cast<std::size_t>(r)]);
  }
  const auto fwd = zb_h1_ops({.stages = 4, .microbatches = 3, .backward = false, .weight = false});
  REQUIRE(fwd.size() == 3);
  for (int i = 0; i < 3; ++i)
    CHECK(fwd[static_cast<std::size_t>(i)] == disttrain::schedule_op::forward(0, 0, i));
  // The ops name the stage they are given (a chain stage), not the position.
  for (const auto& o : zb_h1_ops({.stages = 4, .position = 1, .microbatches = 8, .op_stage = 7}))
    CHECK(o.stage == 7);
}

TEST_CASE("communication pass adds one send/recv pair per crossing tensor") {
  const int p = 3, m = 5;
  const auto s = add_communication(make_1f1b(p, m));
  const auto rep = validate_schedule(s);
  CHECK(rep.num_messages == static_cast<std::size_t>(2 * (p - 1) * m));  // activations + gradients
  // Rank 1: each F is preceded by recv_act from rank 0 and followed by send_act to rank 2.
  const auto& ops = s.ops[1];
  REQUIRE(ops.size() >= 3);
  CHECK(ops[0] == schedule_op::send(op_kind::recv_act, 0, 0, 0, 0));
  CHECK(ops[1] == schedule_op::forward(1, 0, 0));
  CHECK(ops[2] == schedule_op::send(op_kind::send_act, 1, 0, 0, 2));
  // Interleaved: the last rank sends chunk 0's output to rank 0's chunk 1.
  const auto si = add_communication(make_interleaved_1f1b(2, 2, 2));
  bool wrap = false;
  for (const auto& o : si.ops[1])
    wrap = wrap || (o.kind == op_kind::send_act && o.peer == 0 && o.chunk == 0);
  CHECK(wrap);
  DISTTRAIN_CHECK_ERROR(add_communication(s), errc::schedule_error, "rank 0");
}

TEST_CASE("grad sync pass: one bucket set per chunk, finishes before the step") {
  const auto s = add_grad_sync(add_communication(make_interleaved_1f1b(2, 4, 2)), 2);
  const auto rep = validate_schedule(s);
  CHECK(rep.num_collectives == 2u * 4u);  // 2 stages x (2 chunks x 2 buckets)
  for (const auto& ops : s.ops) {
    CHECK(ops.back().kind == op_kind::optimizer_step);
    int starts = 0, finishes = 0;
    for (const auto& o : ops) {
      starts += o.kind == op_kind::grad_sync_start ? 1 : 0;
      finishes += o.kind == op_kind::grad_sync_finish ? 1 : 0;
    }
    CHECK(starts == 4);
    CHECK(finishes == 4);
  }
  DISTTRAIN_CHECK_ERROR(add_grad_sync(s), errc::schedule_error, "rank 0");
  DISTTRAIN_CHECK_ERROR(add_grad_sync(make_1f1b(2, 2), 0), errc::invalid_argument,
                        "buckets_per_chunk");
}

TEST_CASE("schedule JSON round-trips and reports bad fields by path") {
  const auto s = add_grad_sync(add_communication(make_zb_h1(3, 4)));
  const json j = s;
  const auto back = j.get<pipeline_schedule>();
  CHECK(back.ops == s.ops);
  CHECK(back.segments == s.segments);
  CHECK(back.ranks == s.ranks);
  CHECK(back.split_backward);
  json bad = j;
  bad["ranks"][1]["ops"][2]["kind"] = "X";
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error,
                        "schedule.ranks[1].ops[2].kind");
  bad = j;
  bad["ranks"][0].erase("stage");
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error, "schedule.ranks[0].stage");
  bad = j;
  bad["ranks"][0]["ops"][0]["stage"] = 7;
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::schedule_error, "rank 0");
  // Unknown keys are errors at every level, not silently dropped.
  bad = j;
  bad["ranks"][1]["ops"][2]["microbatch"] = 1;
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error,
                        "schedule.ranks[1].ops[2].microbatch");
  bad = j;
  bad["ranks"][0]["replicas"] = 1;
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error,
                        "schedule.ranks[0].replicas");
  bad = j;
  bad["num_chunk"] = 2;
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error, "schedule.num_chunk");
}

TEST_CASE("schedule JSON: segments are topology modules; the older segment form still reads") {
  disttrain::multi_module_spec spec;
  spec.segments = {{.name = "enc",
                    .role = disttrain::module_role::encoder,
                    .pp = 1,
                    .dp = 2,
                    .trainable = false},
                   {.name = "bb", .pp = 2, .chunks = 2}};
  spec.num_microbatches = 4;
  const auto s = make_multi_module(spec);
  const json j = s;
  CHECK(
      j["segments"][0] ==
      json::parse(R"({"name":"enc","role":"encoder","pp":1,"dp":2,"trainable":false,"chunks":1})"));
  CHECK(j.get<pipeline_schedule>().segments == s.segments);
  CHECK(s.first_stage(0) == 0);
  CHECK(s.first_stage(1) == 1);
  // The older form: "first_stage" and "num_stages" per segment, no role.
  json old = j;
  old["segments"] = json::parse(
      R"([{"name":"enc","first_stage":0,"num_stages":1,"dp":2,"trainable":false,"chunks":1},
          {"name":"bb","first_stage":1,"num_stages":2,"dp":1,"trainable":true,"chunks":2}])");
  const auto back = old.get<pipeline_schedule>();
  CHECK(back.segments[0].pp == 1);
  CHECK(back.segments[1].pp == 2);
  CHECK(back.segments[1].chunks == 2);
  CHECK(back.ops == s.ops);
  json bad = old;
  bad["segments"][1]["first_stage"] = 2;
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error,
                        "schedule.segments[1].first_stage");
  bad = j;
  bad["segments"][1]["num_stages"] = 2;  // and "pp": the stages twice
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error,
                        "schedule.segments[1].num_stages");
  bad = j;
  bad["segments"][0]["role"] = "decoder";  // as in a topology's JSON: invalid_argument
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::invalid_argument,
                        "schedule.segments[0].role");
  bad = j;
  bad["segments"][0]["tp"] = 2;  // a schedule rank stands for its TP group: not a schedule field
  DISTTRAIN_CHECK_ERROR(bad.get<pipeline_schedule>(), errc::parse_error, "schedule.segments[0].tp");
}
