// Bind benchmark: the bind step (bind/bind.hpp) at paper scale. The planner's
// layout of the paper-72b scenario (ViT-H/14 + Qwen2-72B + SD-2.1) on 1296
// H800s with plain 1F1B, a batch of 1024 samples drawn from the scenario's
// data, 32 microbatches, activation bytes from the cost model
// (plan_link_shapes). Measured, each against a baseline in the same run:
//  1. bind_rank for one rank (the slowest of a few: the first backbone stage,
//     fed by the encoder; a middle backbone stage; the generator if it owns
//     ranks), target <= 1 ms; baseline: plan_route of the same routes alone,
//     whole (bind_rank plans only the rank's part of each).
//  2. bind_world, target <= 50 ms; baseline: plan_route of every route alone,
//     with pieces (bind_world plans headers only). Timed into the same world
//     each call (a training loop rebinding every batch: the programs' storage
//     is reused) and, beside it, into a new world each call (every program in
//     fresh memory: page faults of ~40-80 MB of ops).
// Each time is the median wall time per call and this thread's CPU time per
// call (the machine may be shared: wall times grow with its load).
//  3. reorder + bind_rank as a share of the modelled iteration (the
//     planner's evaluation of its plan for the batch, with the microbatch
//     count it chose: the layout rebound with 32 microbatches may not fit in
//     memory), target <= 1%; baseline: the reorder alone.
//  4. Interleaved: the same layout and batch with the backbone in 2 model
//     chunks per device (interleaved 1F1B), with the least multiple of its pp
//     microbatches: bind_rank (the same ranks) and bind_world, each against
//     the plain layout bound for that microbatch count in the same run.
//  5. The rendezvous order (schedule/rendezvous_order.hpp) on both layouts
//     of 4.: bind_rank then message_rounds + order_for_rendezvous (what
//     disttrain.torch does per batch), against bind_rank alone; and the
//     world copied then ordered, against the copy alone.
//  6. Links of several fields (bind.hpp, link_shape): the plain layout with
//     every link also carrying position ids (one int64 per row, split by
//     rows) and a sequence length (one int32 per sample), neither
//     differentiable: bind_rank (the same ranks) and bind_world against the
//     one-field layout in the same run.
// A hash of the bound world is printed (determinism: equal across runs and
// machines). --quick: mllm-7b on 64 GPUs, 256 samples, 8 microbatches.
// --json prints one JSON object.
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disttrain/bind/bind.hpp"
#include "disttrain/bind/plan_reorder.hpp"
#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/bind/topology_views.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/model/workload.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/schedule/rendezvous_order.hpp"
#include "harness.hpp"

using namespace disttrain;

namespace {

// Median wall ms per call; `cpu_ms`: median CPU ms of this thread per call
// (what the call costs whatever the machine's load).
double ms_of(const std::function<void()>& fn, bool quick, double* cpu_ms = nullptr) {
  double cpu = 0;
  const double wall = bench::time_per_call(fn, quick ? 0.02 : 0.3, quick ? 3 : 5, &cpu);
  if (cpu_ms != nullptr) *cpu_ms = 1e3 * cpu;
  return 1e3 * wall;
}

// FNV-1a over every program: each op (kind, peer, microbatch, bytes, tag,
// link, phase, message, stamp), the buffer sizes, virtual stages and DP
// group: a refactor of bind must keep it.
std::uint64_t hash_world(const bound_world& w) {
  std::uint64_t h = 1469598103934665603ULL;
  const auto mix = [&](auto x) {
    const auto v = static_cast<std::uint64_t>(x);
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xFFU;
      h *= 1099511628211ULL;
    }
  };
  for (const auto& p : w.programs) {
    for (const auto& b : p.ops) {
      mix(static_cast<int>(b.op.kind));
      for (const auto v : {b.op.peer, b.op.microbatch, b.tag, b.link, b.phase, b.message}) mix(v);
      mix(b.bytes);
      mix(b.stamp);
    }
    for (const auto& v : {p.input_elements, p.output_elements})
      for (const std::int64_t e : v) mix(e);
    for (const int v : p.virtual_stages) mix(v);
    for (const int r : p.dp_group) mix(r);
  }
  return h;
}

// The routes bind_rank plans for `rank` (slots into / out of its stage),
// planned alone: the baseline of bind_rank.
std::size_t plan_routes_of(const topology& t, const reorder_result& map,
                           const std::vector<link_shape>& shapes, int rank, bool all_links) {
  const topology_coord me = t.coord(rank);
  const int c = t.chain_stage(me.module, me.stage);
  std::size_t messages = 0;
  for (std::size_t j = 0; j < map.microbatches; ++j) {
    const microbatch_placement mp = microbatch_placements(map, j);
    for (int link = 0; link + 1 < t.num_chain_stages(); ++link) {
      if (!all_links && link != c - 1 && link != c) continue;
      const link_field& ls = shapes[static_cast<std::size_t>(link)].fields.at(0);
      activation_shape a;
      a.hidden = ls.hidden;
      a.elem_size = ls.elem_size;
      for (const std::uint32_t idx : mp.samples) a.rows.push_back(ls.rows[idx]);
      const auto [ma, sa] = t.chain_at(link);
      const auto [mb, sb] = t.chain_at(link + 1);
      const route_endpoint up{ma, sa}, down{mb, sb};
      // The sample map lists the modules that own ranks (topology::owning_modules).
      const sample_placement& pu = mp.module[static_cast<std::size_t>(t.owning_index(ma))];
      const sample_placement& pd = mp.module[static_cast<std::size_t>(t.owning_index(mb))];
      for (const bool bwd : {false, true}) {
        const route_options o{ls.split, true, bwd};
        const route_plan r =
            bwd ? plan_route(t, down, pd, up, pu, a, o) : plan_route(t, up, pu, down, pd, a, o);
        messages += r.messages().size();
      }
    }
  }
  return messages;
}

// `t` with its backbone in `chunks` model chunks per device (layers
// dropped where they do not split: they only weigh the reorderer's stages).
topology interleaved(const topology& t, int chunks) {
  std::vector<topology_module> mods = t.modules();
  topology_module& bb = mods[static_cast<std::size_t>(t.backbone().value)];
  bb.chunks = chunks;
  for (const int l : bb.layers)
    if (l % chunks != 0) bb.layers.clear();
  return topology(std::move(mods));
}

// The plain layout's link shapes on the interleaved topology `ti`: a link
// into chain stage c + 1 is the plain link c; a backbone wrap (chunk k on
// its last stage to chunk k + 1 on its first) carries the backbone's own
// activation, as its link into the last stage.
std::vector<link_shape> interleaved_shapes(const topology& ti,
                                           const std::vector<link_shape>& plain) {
  std::vector<link_shape> out;
  for (int l = 0; l < ti.num_links(); ++l) {
    const int up = ti.virtual_at(l).first, down = ti.virtual_at(l + 1).first;
    out.push_back(plain.at(static_cast<std::size_t>(down == up + 1 ? up : up - 1)));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const bench::options opt = bench::parse_options(argc, argv);
  const bool quick = opt.quick;
  const std::string preset = quick ? "mllm-7b" : "paper-72b";
  const int gpus = quick ? 64 : 1296;
  const int samples = quick ? 256 : 1024;
  const int microbatches = quick ? 8 : 32;

  // The planner's layout in plain 1F1B (4. interleaves it).
  scenario sc = presets::scenario_preset(preset);
  sc.cluster.num_gpus = gpus;
  sc.global_batch_size = samples;
  const analytic_cost_model cm(sc.model, sc.cluster);
  planner_options popt;
  popt.max_virtual_stages = 1;
  const plan_result planned = plan_parallelism(cm, make_request(sc), popt);
  parallel_plan plan = planned.plan;
  plan.num_microbatches = microbatches;
  plan.global_batch = samples;
  const topology topo = topology_of(plan, sc.model);
  const pipeline_schedule chain = chain_program(topo, {.microbatches = microbatches});

  // The batch, its costs per module and its sample map.
  const data_sampler sampler(sc.data);
  const std::vector<sample> batch = sampler.draw_batch(0, static_cast<std::size_t>(samples));
  std::vector<model_workload> work;
  for (const sample& s : batch) work.push_back(workload_of(sc.model, s));
  const plan_reorder<analytic_cost_model> pr = reorder_for_plan(plan, cm);
  std::vector<sample_meta> meta;
  describe_batch(batch, pr.cost, meta);
  reorderer<> reo(pr.options);
  reorder_result map = reo.assign(meta);
  const std::vector<link_shape> shapes =
      plan_link_shapes(plan, cm, topo, map, std::span<const model_workload>(work));

  // 1. One rank: the slowest of a few representative ranks.
  std::vector<int> ranks;
  const module_id bb = topo.backbone();
  const topology_module& bbm = topo.module(bb);
  ranks.push_back(topo.rank({bb, stage_id{0}, replica_id{0}, 0}));
  ranks.push_back(topo.rank({bb, stage_id{bbm.pp / 2}, replica_id{bbm.dp / 2}, bbm.tp - 1}));
  for (const module_id m : topo.owning_modules())
    if (topo.module(m).role != module_role::backbone)
      ranks.push_back(topo.rank({m, stage_id{0}, replica_id{0}, 0}));
  double rank_ms = 0, rank_cpu_ms = 0, rank_routes_ms = 0, rank_routes_cpu_ms = 0;
  int slowest = ranks.front();
  std::size_t rank_ops = 0;
  for (const int r : ranks) {
    std::size_t ops = 0;
    double cpu = 0;
    const double t = ms_of(
        [&] {
          const bound_rank b = bind_rank(topo, chain, map, shapes, r);
          ops = b.program.ops.size();
          bench::do_not_optimize(ops);
        },
        quick, &cpu);
    if (t > rank_ms) {
      rank_ms = t;
      rank_cpu_ms = cpu;
      slowest = r;
      rank_ops = ops;
    }
  }
  rank_routes_ms =
      ms_of([&] { bench::do_not_optimize(plan_routes_of(topo, map, shapes, slowest, false)); },
            quick, &rank_routes_cpu_ms);

  // 2. The whole world.
  bound_world world;
  double world_cpu_ms = 0, world_routes_cpu_ms = 0;
  // Into the same world each call (a training loop's rebind: storage reused),
  // and into a new world each call (fresh memory for every program).
  const double world_ms =
      ms_of([&] { bind_world(topo, chain, map, shapes, world); }, quick, &world_cpu_ms);
  const double world_fresh_ms =
      ms_of([&] { bench::do_not_optimize(bind_world(topo, chain, map, shapes).num_ops()); }, quick);
  const double world_routes_ms =
      ms_of([&] { bench::do_not_optimize(plan_routes_of(topo, map, shapes, 0, true)); }, quick,
            &world_routes_cpu_ms);
  const std::uint64_t hash = hash_world(world);
  // bind_rank and bind_world agree on the slowest rank.
  const bool agree = bind_rank(topo, chain, map, shapes, slowest).program.ops ==
                     world.programs[static_cast<std::size_t>(slowest)].ops;

  // 4. Interleaved (2 chunks per backbone device) against plain 1F1B, both
  // with m2 microbatches (the least multiple of the backbone's pp >= m, as
  // Megatron-LM's interleaving needs) and the map of the same batch for m2.
  require(bbm.pp >= 2, "bench_bind", "the planned backbone has pp ", bbm.pp,
          ": nothing to interleave (section 4 needs pp >= 2)");
  const int m2 = (microbatches + bbm.pp - 1) / bbm.pp * bbm.pp;
  reorder_options o2 = pr.options;
  o2.microbatches = static_cast<std::uint32_t>(m2);
  const reorder_result map2 = reorderer<>(o2).assign(meta);
  const std::vector<link_shape> shapes_m2 =
      plan_link_shapes(plan, cm, topo, map2, std::span<const model_workload>(work));
  const topology topo2 = interleaved(topo, 2);
  const std::vector<link_shape> shapes2 = interleaved_shapes(topo2, shapes_m2);
  struct side {
    const topology* t;
    pipeline_schedule chain;
    const std::vector<link_shape>* shapes;
    double rank_ms = 0, rank_cpu_ms = 0, world_ms = 0, world_cpu_ms = 0, world_fresh_ms = 0;
    double ordered_rank_ms = 0, copy_ms = 0, ordered_copy_ms = 0;
    std::size_t ops = 0;
    std::uint64_t hash = 0;
  };
  std::array<side, 2> sides{side{&topo, chain_program(topo, {.microbatches = m2}), &shapes_m2},
                            side{&topo2, chain_program(topo2, {.microbatches = m2}), &shapes2}};
  for (side& x : sides) {
    for (const int r : ranks) {
      double cpu = 0;
      const double t = ms_of(
          [&] {
            bench::do_not_optimize(bind_rank(*x.t, x.chain, map2, *x.shapes, r).program.ops.size());
          },
          quick, &cpu);
      if (t > x.rank_ms) {
        x.rank_ms = t;
        x.rank_cpu_ms = cpu;
      }
    }
    bound_world w;
    x.world_ms =
        ms_of([&] { bind_world(*x.t, x.chain, map2, *x.shapes, w); }, quick, &x.world_cpu_ms);
    x.world_fresh_ms =
        ms_of([&] { bench::do_not_optimize(bind_world(*x.t, x.chain, map2, *x.shapes).num_ops()); },
              quick);
    x.ops = w.num_ops();
    x.hash = hash_world(w);
    for (const int r : ranks)
      x.ordered_rank_ms = std::max(
          x.ordered_rank_ms, ms_of(
                                 [&] {
                                   bound_rank b = bind_rank(*x.t, x.chain, map2, *x.shapes, r);
                                   order_for_rendezvous(b.program, message_rounds(x.chain));
                                   bench::do_not_optimize(b.program.ops.size());
                                 },
                                 quick));
    bound_world c;
    x.copy_ms = ms_of([&] { c = w; }, quick);
    x.ordered_copy_ms = ms_of(
        [&] {
          c = w;
          order_for_rendezvous(c, x.chain);
        },
        quick);
  }
  const side &plain2 = sides[0], &inter = sides[1];

  // 6. Three fields per link against one.
  std::vector<link_shape> shapes3 = shapes;
  for (link_shape& l : shapes3) {
    const std::vector<std::int64_t> rows = l.fields.at(0).rows;
    l.fields.push_back({.name = "position_ids",
                        .hidden = 1,
                        .elem_size = 8,
                        .rows = rows,
                        .split = split_axis::rows,
                        .differentiable = false});
    l.fields.push_back({.name = "seq_len",
                        .hidden = 1,
                        .elem_size = 4,
                        .rows = std::vector<std::int64_t>(rows.size(), 1),
                        .differentiable = false});
  }
  double fields_rank_ms = 0;
  for (const int r : ranks)
    fields_rank_ms = std::max(
        fields_rank_ms,
        ms_of(
            [&] {
              bench::do_not_optimize(bind_rank(topo, chain, map, shapes3, r).program.ops.size());
            },
            quick));
  bound_world world3;
  const double fields_world_ms =
      ms_of([&] { bind_world(topo, chain, map, shapes3, world3); }, quick);

  // 3. Reorder + bind per iteration vs the modelled iteration.
  reorder_result scratch;
  double reorder_cpu_ms = 0;
  const double reorder_ms = ms_of([&] { reo.assign(meta, scratch); }, quick, &reorder_cpu_ms);
  const double iteration_ms = 1e3 * planned.evaluation.iteration_time_s;
  const double share_rank = (reorder_ms + rank_ms) / iteration_ms;
  const double share_world = (reorder_ms + world_ms) / iteration_ms;
  const double share_rank_cpu = (reorder_cpu_ms + rank_cpu_ms) / iteration_ms;

  const double load = bench::load_average();
  if (opt.json) {
    nlohmann::json j{
        {"benchmark", "bind"},
        {"preset", preset},
        {"gpus", topo.world_size()},
        {"topology", describe(topo)},
        {"samples", samples},
        {"microbatches", microbatches},
        {"bind_rank_ms", rank_ms},
        {"bind_rank_cpu_ms", rank_cpu_ms},
        {"bind_rank_routes_only_cpu_ms", rank_routes_cpu_ms},
        {"bind_world_cpu_ms", world_cpu_ms},
        {"bind_world_routes_only_cpu_ms", world_routes_cpu_ms},
        {"reorder_cpu_ms", reorder_cpu_ms},
        {"reorder_plus_bind_rank_share_cpu", share_rank_cpu},
        {"bind_rank_rank", slowest},
        {"bind_rank_ops", rank_ops},
        {"bind_rank_routes_only_ms", rank_routes_ms},
        {"bind_rank_vs_routes", rank_ms / rank_routes_ms},
        {"bind_world_ms", world_ms},
        {"bind_world_fresh_ms", world_fresh_ms},
        {"bind_world_ops", world.num_ops()},
        {"bind_world_routes_only_ms", world_routes_ms},
        {"bind_world_vs_routes", world_ms / world_routes_ms},
        {"reorder_ms", reorder_ms},
        {"modelled_iteration_ms", iteration_ms},
        {"modelled_microbatches", planned.plan.num_microbatches},
        {"reorder_plus_bind_rank_share", share_rank},
        {"reorder_plus_bind_world_share", share_world},
        {"bind_rank_equals_world", agree},
        {"interleaved_topology", describe(topo2)},
        {"interleaved_microbatches", m2},
        {"interleaved_bind_rank_ms", inter.rank_ms},
        {"interleaved_bind_rank_cpu_ms", inter.rank_cpu_ms},
        {"interleaved_baseline_bind_rank_ms", plain2.rank_ms},
        {"interleaved_bind_rank_vs_plain", inter.rank_ms / plain2.rank_ms},
        {"interleaved_bind_world_ms", inter.world_ms},
        {"interleaved_bind_world_cpu_ms", inter.world_cpu_ms},
        {"interleaved_bind_world_fresh_ms", inter.world_fresh_ms},
        {"interleaved_baseline_bind_world_fresh_ms", plain2.world_fresh_ms},
        {"interleaved_baseline_bind_world_ms", plain2.world_ms},
        {"interleaved_bind_world_ops", inter.ops},
        {"interleaved_bind_world_vs_plain", inter.world_ms / plain2.world_ms},
        {"rendezvous_bind_rank_ms", {plain2.ordered_rank_ms, inter.ordered_rank_ms}},
        {"rendezvous_world_copy_ms", {plain2.copy_ms, inter.copy_ms}},
        {"rendezvous_world_copy_and_order_ms", {plain2.ordered_copy_ms, inter.ordered_copy_ms}},
        {"hash", fmt::format("{:016x}", hash)},
        {"interleaved_hash", fmt::format("{:016x}", inter.hash)},
        {"fields_bind_rank_ms", fields_rank_ms},
        {"fields_bind_rank_vs_one_field", fields_rank_ms / rank_ms},
        {"fields_bind_world_ms", fields_world_ms},
        {"fields_bind_world_vs_one_field", fields_world_ms / world_ms},
        {"load_average_1min", load}};
    fmt::print("{}\n", j.dump(2));
  } else {
    fmt::print("bind: {} on {} GPUs: {}\n", preset, topo.world_size(), describe(topo));
    fmt::print("  {} samples, {} microbatches, {} ops in the world, hash {:016x}{}\n", samples,
               microbatches, world.num_ops(), hash,
               agree ? "" : "  (bind_rank DIFFERS from bind_world)");
    fmt::print("  (wall ms per call, median; cpu: this thread's CPU ms per call)\n");
    fmt::print(
        "  {:<40} {:>9.3f} ms  cpu {:.3f} ms  (rank {}, {} ops; target <= 1 ms)  x{:.3f} "
        "plan_route of its whole routes ({:.3f} ms, cpu {:.3f} ms)\n",
        "bind_rank, slowest of a few ranks", rank_ms, rank_cpu_ms, slowest, rank_ops,
        rank_ms / rank_routes_ms, rank_routes_ms, rank_routes_cpu_ms);
    fmt::print(
        "  {:<40} {:>9.3f} ms  cpu {:.3f} ms  (target <= 50 ms)  x{:.2f} plan_route of every "
        "route ({:.3f} ms, cpu {:.3f} ms)\n",
        "bind_world (into the same world)", world_ms, world_cpu_ms, world_ms / world_routes_ms,
        world_routes_ms, world_routes_cpu_ms);
    fmt::print("  {:<40} {:>9.3f} ms  (fresh memory for every program)\n",
               "bind_world (into a new world)", world_fresh_ms);
    fmt::print(
        "  interleaved, 2 chunks per backbone device, {} microbatches ({} ops in the world; "
        "plain 1F1B at {} microbatches as the baseline: {} ops; hash {:016x}):\n",
        m2, inter.ops, m2, plain2.ops, inter.hash);
    fmt::print(
        "  {:<40} {:>9.3f} ms  cpu {:.3f} ms  (target <= 1 ms)  x{:.3f} plain bind_rank ({:.3f} "
        "ms)\n",
        "bind_rank, slowest of the same ranks", inter.rank_ms, inter.rank_cpu_ms,
        inter.rank_ms / plain2.rank_ms, plain2.rank_ms);
    fmt::print(
        "  {:<40} {:>9.3f} ms  cpu {:.3f} ms  (target <= 50 ms)  x{:.3f} plain bind_world ({:.3f} "
        "ms)\n",
        "bind_world (into the same world)", inter.world_ms, inter.world_cpu_ms,
        inter.world_ms / plain2.world_ms, plain2.world_ms);
    fmt::print("  {:<40} {:>9.3f} ms  x{:.3f} plain ({:.3f} ms; fresh memory for every program)\n",
               "bind_world (into a new world)", inter.world_fresh_ms,
               inter.world_fresh_ms / plain2.world_fresh_ms, plain2.world_fresh_ms);
    for (const side* x : {&plain2, &inter})
      fmt::print(
          "  rendezvous order, {}: bind_rank + order {:.3f} ms  x{:.3f} bind_rank alone; world "
          "copy + order {:.3f} ms  x{:.3f} the copy alone ({:.3f} ms)\n",
          x == &inter ? "interleaved" : "plain      ", x->ordered_rank_ms,
          x->ordered_rank_ms / x->rank_ms, x->ordered_copy_ms, x->ordered_copy_ms / x->copy_ms,
          x->copy_ms);
    fmt::print(
        "  three fields per link (+ int64 position ids per row, int32 length per sample):\n");
    fmt::print("  {:<40} {:>9.3f} ms  x{:.3f} one field ({:.3f} ms)\n",
               "bind_rank, slowest of the same ranks", fields_rank_ms, fields_rank_ms / rank_ms,
               rank_ms);
    fmt::print("  {:<40} {:>9.3f} ms  x{:.3f} one field ({:.3f} ms)\n",
               "bind_world (into the same world)", fields_world_ms, fields_world_ms / world_ms,
               world_ms);
    fmt::print("  {:<40} {:>9.3f} ms  cpu {:.3f} ms\n", "reorder (baseline of 3.)", reorder_ms,
               reorder_cpu_ms);
    fmt::print(
        "  {:<40} {:>9.4f} %   cpu {:.4f} %  (target <= 1 %; reorder alone {:.4f} %) of the "
        "modelled iteration {:.1f} ms ({} microbatches)\n",
        "reorder + bind_rank", 100.0 * share_rank, 100.0 * share_rank_cpu,
        100.0 * reorder_ms / iteration_ms, iteration_ms, planned.plan.num_microbatches);
    fmt::print("  {:<40} {:>9.4f} %\n", "reorder + bind_world", 100.0 * share_world);
    fmt::print("  1-minute load average {:.2f} (wall times grow with it)\n", load);
  }
  return agree ? 0 : 1;
}
