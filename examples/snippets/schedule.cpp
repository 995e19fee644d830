// The examples of the schedule part (disttrain/schedule/*.hpp): see snippets.hpp.
#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/schedule.hpp"
#include "disttrain/schedule/format.hpp"
#include "disttrain/schedule/validate_bound.hpp"
#include "disttrain/sim/simulator.hpp"
#include "small_world.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

// The op tokens of one rank ("F0 F1 ... B7"), as format_schedule writes them.
std::string tokens(const disttrain::pipeline_schedule& s, std::size_t rank) {
  std::string out;
  for (const auto& op : s.ops[rank])
    out += (out.empty() ? "" : " ") + disttrain::format_op_token(op);
  return out;
}

void bound_program() {
  const snippets::small_world sw;
  const auto& topo = sw.topo;
  const auto& chain = sw.chain;
  const auto& map = sw.map;
  const auto& shapes = sw.shapes;
  const std::size_t my_rank = 2;
  //! [bound_program]
  disttrain::bound_world w = disttrain::bind_world(topo, chain, map, shapes);
  disttrain::validate_bound(w);  // matching, sizes, no deadlock
  const disttrain::bound_program& mine = w.programs[my_rank];
  //! [bound_program]
  check(w.programs.size() == 5 && !mine.ops.empty(), "one program per rank");
}

void communication() {
  //! [communication]
  auto s = disttrain::add_grad_sync(disttrain::add_communication(disttrain::make_1f1b(4, 8)));
  //! [communication]
  check(disttrain::validate_schedule(s).peak_inflight.size() == 4, "valid with comm and sync");
}

void format() {
  //! [format]
  fmt::print("{}", disttrain::format_schedule(disttrain::make_interleaved_1f1b(4, 8, 2)));
  // interleaved_1f1b: 4 ranks, 4 stages x 2 chunks, 8 microbatches
  // rank  where           F<1st B  ops
  //    0  pipeline s0 r0       11  F0 F1 F2 F3 F0c1 F1c1 F2c1 F3c1 F4 F5 F6 B0c1 ...
  //! [format]
  const std::string text = disttrain::format_schedule(disttrain::make_interleaved_1f1b(4, 8, 2));
  check(text.starts_with("interleaved_1f1b: 4 ranks, 4 stages x 2 chunks, 8 microbatches\n"
                         "rank  where           F<1st B  ops\n"
                         "   0  pipeline s0 r0       11  F0 F1 F2 F3 F0c1 F1c1 F2c1 F3c1 F4 F5 F6 "
                         "B0c1 "),
        "format_schedule: the lines shown");
}

void gpipe() {
  //! [gpipe]
  auto s = disttrain::make_gpipe(/*stages*/ 4, /*microbatches*/ 8);  // compute-only
  s = disttrain::add_communication(std::move(s));
  //! [gpipe]
  check(disttrain::validate_schedule(s).peak_inflight == std::vector<int>{8, 8, 8, 8},
        "GPipe holds every microbatch");
}

void interleaved() {
  //! [interleaved]
  auto s = disttrain::make_interleaved_1f1b(/*p*/ 4, /*m*/ 8, /*v*/ 2);
  //! [interleaved]
  check(s.num_chunks == 2 && s.ops.size() == 4, "interleaved shape");
}

void multi_module_file() {
  //! [multi_module_file]
  disttrain::multi_module_spec spec;
  spec.segments = {{.name = "encoder", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "backbone", .pp = 4, .dp = 3},
                   {.name = "generator", .role = disttrain::module_role::generator, .pp = 1}};
  spec.num_microbatches = 3 * 8;  // 8 per backbone replica
  auto s = disttrain::add_communication(disttrain::make_multi_module(spec));
  //! [multi_module_file]
  check(s.ranks.size() == 2 + 12 + 1, "ranks: 2 + 4 x 3 + 1");
  (void)disttrain::validate_schedule(s);
}

void module_order() {
  //! [module_order]
  disttrain::multi_module_spec spec;
  spec.segments = {{.name = "encoder", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "backbone", .pp = 2}};
  spec.num_microbatches = 4;
  // the encoder: replica 1 takes microbatches 0 and 1; the backbone: defaults
  spec.order = {{.replica_of = {1, 1, 0, 0}}, {}};
  //! [module_order]
  const auto s = disttrain::make_multi_module(spec);
  int forwards_of_rank1 = 0;
  for (const auto& o : s.ops[1]) forwards_of_rank1 += o.kind == disttrain::op_kind::forward ? 1 : 0;
  check(forwards_of_rank1 == 2, "encoder replica 1 runs two microbatches");
}

void multi_module_spec() {
  //! [multi_module_spec]
  disttrain::multi_module_spec spec;
  spec.segments = {{.name = "encoder", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "backbone", .pp = 2, .dp = 3}};
  spec.num_microbatches = 12;
  //! [multi_module_spec]
  check(disttrain::make_multi_module(spec).ranks.size() == 2 + 6, "multi_module_spec");
}

void one_f_one_b() {
  //! [one_f_one_b]
  auto s = disttrain::make_1f1b(4, 8);
  // s.ops[0] = F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7
  //! [one_f_one_b]
  check(tokens(s, 0) == "F0 F1 F2 F3 B0 F4 B1 F5 B2 F6 B3 F7 B4 B5 B6 B7", "1F1B rank 0");
}

void op_file() {
  //! [op_file]
  using disttrain::schedule_op;
  schedule_op f = schedule_op::forward(/*stage*/ 1, /*chunk*/ 0, /*microbatch*/ 3);
  // f.kind == op_kind::forward, f.peer == -1, f.bucket == -1
  //! [op_file]
  check(f.kind == disttrain::op_kind::forward && f.peer == -1 && f.bucket == -1, "forward op");
}

void schedule_op() {
  //! [schedule_op]
  auto s = disttrain::schedule_op::send(disttrain::op_kind::send_act, 0, 0, 5, /*peer*/ 1);
  //! [schedule_op]
  check(s.kind == disttrain::op_kind::send_act && s.microbatch == 5 && s.peer == 1, "send op");
}

void schedule_file() {
  //! [schedule_file]
  auto s = disttrain::make_1f1b(4, 8);             // compute-only, 4 ranks
  s = disttrain::add_communication(std::move(s));  // + send/recv ops
  auto report = disttrain::validate_schedule(s);   // throws schedule_error if broken
  //! [schedule_file]
  check(report.max_peak_inflight() == 4, "1F1B validated");
}

void schedule_rank() {
  //! [schedule_rank]
  disttrain::schedule_rank r{/*segment*/ 1, /*stage*/ 2, /*replica*/ 0};
  //! [schedule_rank]
  check(r.segment == 1 && r.stage == 2 && r.replica == 0, "schedule_rank");
}

void pipeline_schedule() {
  int ran = 0;
  auto run = [&](const disttrain::schedule_op&) { ++ran; };  // the host runs an op
  //! [pipeline_schedule]
  disttrain::pipeline_schedule s = disttrain::make_gpipe(2, 4);
  for (std::size_t r = 0; r < s.ranks.size(); ++r)
    for (const auto& op : s.ops[r]) run(op);
  //! [pipeline_schedule]
  check(ran == 2 * 2 * 4, "F and B of 4 microbatches on 2 ranks");
}

void validate_file() {
  //! [validate_file]
  auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  auto rep = disttrain::validate_schedule(s);
  // rep.peak_inflight == {4, 3, 2, 1}
  //! [validate_file]
  check(rep.peak_inflight == std::vector<int>{4, 3, 2, 1}, "1F1B peaks");
}

void validation_report() {
  const auto s = disttrain::add_communication(disttrain::make_1f1b(4, 8));
  //! [validation_report]
  auto rep = disttrain::validate_schedule(s);
  int worst = rep.max_peak_inflight();
  //! [validation_report]
  check(worst == 4, "max_peak_inflight");
}

void validate_bound() {
  const snippets::small_world sw;
  const auto& topo = sw.topo;
  const auto& chain = sw.chain;
  const auto& map = sw.map;
  const auto& shapes = sw.shapes;
  //! [validate_bound]
  auto world = disttrain::bind_world(topo, chain, map, shapes);
  auto rep = disttrain::validate_bound(world);  // rep.messages, rep.bytes
  //! [validate_bound]
  check(rep.messages > 0 && rep.bytes > 0, "validate_bound counts messages");
}

void p2p_batches() {
  const snippets::small_world sw;
  //! [p2p_batches]
  auto world = disttrain::bind_world(sw.topo, sw.chain, sw.map, sw.shapes);
  // Per op of rank 2: its batch (one NCCL group), -1 for compute and collectives.
  std::vector<int> batch = disttrain::p2p_batches(world.programs[2]);
  //! [p2p_batches]
  check(batch.size() == world.programs[2].ops.size() &&
            *std::max_element(batch.begin(), batch.end()) > 0,
        "p2p_batches: one entry per op, several batches");
}

void rendezvous_order() {
  const snippets::small_world sw;
  //! [rendezvous_order]
  auto world = disttrain::bind_world(sw.topo, sw.chain, sw.map, sw.shapes);
  disttrain::order_for_rendezvous(world, sw.chain);  // each message in its round
  disttrain::validate_bound(world, disttrain::p2p_semantics::rendezvous);  // as NCCL runs it
  //! [rendezvous_order]
  check(disttrain::validate_bound(world).messages > 0, "ordered world still valid buffered");
}

void zero_bubble() {
  //! [zero_bubble]
  auto s = disttrain::add_communication(disttrain::make_zb_h1(4, 8));
  auto res = disttrain::simulate(s, disttrain::table_durations::uniform(1, 1, 1));
  //! [zero_bubble]
  check(res.iteration_time == 3 * 8 + 4 - 1, "ZB-H1: (3m + p - 1) T");
}

}  // namespace

int main() {
  snippets::runner r("schedule");
  r.run("bound_program", bound_program);
  r.run("communication", communication);
  r.run("format", format);
  r.run("gpipe", gpipe);
  r.run("interleaved", interleaved);
  r.run("multi_module_file", multi_module_file);
  r.run("module_order", module_order);
  r.run("multi_module_spec", multi_module_spec);
  r.run("one_f_one_b", one_f_one_b);
  r.run("op_file", op_file);
  r.run("schedule_op", schedule_op);
  r.run("schedule_file", schedule_file);
  r.run("schedule_rank", schedule_rank);
  r.run("pipeline_schedule", pipeline_schedule);
  r.run("validate_file", validate_file);
  r.run("validation_report", validation_report);
  r.run("validate_bound", validate_bound);
  r.run("p2p_batches", p2p_batches);
  r.run("rendezvous_order", rendezvous_order);
  r.run("zero_bubble", zero_bubble);
  return r.finish();
}
