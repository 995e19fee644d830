// The examples of the bind part (disttrain/bind/*.hpp), and of the umbrella
// header disttrain/disttrain.hpp: see snippets.hpp.
//! [umbrella]
#include <disttrain/disttrain.hpp>
#include "disttrain/json.hpp"
static_assert(DISTTRAIN_VERSION_MAJOR == disttrain::version_major);
//! [umbrella]

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <span>
#include <thread>
#include <vector>

#include "disttrain/bind.hpp"
#include "disttrain/bind/activation_buffers.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/model.hpp"
#include "disttrain/plan.hpp"
#include "disttrain/schedule.hpp"
#include "local_ranks.hpp"
#include "small_world.hpp"
#include "snippets.hpp"

namespace {

using namespace std::chrono_literals;
using snippets::check;

// mllm-7b (ViT-H/14, Llama-2-7B, SD-2.1) on 64 H800 GPUs, with a hand-made
// 5-GPU plan: encoder DP 2, backbone PP 2, generator DP 1; 16 samples in 8
// microbatches; `batch` holds the workloads of 16 drawn samples.
struct small_plan {
  disttrain::scenario sc = disttrain::presets::scenario_preset("mllm-7b");
  const disttrain::model_spec& model = sc.model;
  disttrain::analytic_cost_model cm{sc.model, sc.cluster};
  disttrain::parallel_plan plan;
  std::vector<disttrain::sample> samples;
  std::vector<disttrain::model_workload> batch;
  small_plan() {
    plan.global_batch = 16;
    plan.num_microbatches = 8;
    plan.modules = {{"vit-h-14", "encoder", 1, 1, 2, {32}},
                    {"llama-2-7b", "backbone", 1, 2, 1, {16, 16}},
                    {"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
    samples = disttrain::data_sampler(sc.data).draw_batch(0, 16);
    for (const auto& s : samples) batch.push_back(disttrain::workload_of(sc.model, s));
  }
};

// The planner's plain-1F1B plan for the mllm-7b scenario (solved once).
const disttrain::plan_result& mllm_7b_result() {
  static const disttrain::plan_result r = [] {
    const auto sc = disttrain::presets::scenario_preset("mllm-7b");
    const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
    disttrain::planner_options o;
    o.max_virtual_stages = 1;
    return disttrain::plan_parallelism(cm, disttrain::make_request(sc), o);
  }();
  return r;
}

using snippets::run_ranks;

// An encoder (DP 2) and a backbone (DP 3): 18 samples in 3 microbatches;
// `layout` places their ranks, `hidden` and `tokens_of` shape a sample's activation.
struct two_module_map {
  disttrain::reorder_result res;
  disttrain::topology layout{{{"enc", disttrain::module_role::encoder, 1, 1, 2},
                              {"llm", disttrain::module_role::backbone, 1, 1, 3}}};
  std::int64_t hidden = 64;
  static std::int64_t tokens_of(std::uint64_t id) { return 1 + static_cast<std::int64_t>(id % 4); }
  two_module_map() {
    disttrain::reorderer<> reorderer(options());
    res = reorderer.assign(batch());
  }
  static disttrain::reorder_options options() {
    disttrain::reorder_options o;
    o.modules = {{"enc", 2}, {"llm", 3}};
    o.microbatches = 3;
    return o;
  }
  static std::vector<disttrain::sample_meta> batch() {
    std::vector<disttrain::sample_meta> b(18);
    for (std::size_t i = 0; i < b.size(); ++i) {
      b[i].id = 100 + i;
      b[i].cost = {1.0 + static_cast<double>(i % 3), 2.0 + static_cast<double>(i % 5)};
    }
    return b;
  }
  // Microbatch j's activation shape over its local ids.
  [[nodiscard]] disttrain::activation_shape shape_of(std::uint32_t j) const {
    disttrain::activation_shape shape{{}, hidden, 2};
    for (std::uint32_t idx : disttrain::microbatch_samples(res, j))
      shape.rows.push_back(tokens_of(res.samples[idx].id));
    return shape;
  }
};

void activation_buffers() {
  const snippets::small_world sw;
  const auto mine = disttrain::bind_rank(sw.topo, sw.chain, sw.map, sw.shapes, /*rank*/ 2);
  //! [activation_buffers]
  disttrain::activation_buffers<float> buf;
  buf.reset(mine);  // mine: the bound_rank of this iteration
  // in the host: payload(op) -> buf.payload(op); received(op) -> buf.received(op)
  std::span<float> x = buf.input(3);  // microbatch 3's input, for F
  //! [activation_buffers]
  std::size_t rows = 0;
  for (auto idx : sw.map.cell(0, 0, 3))
    rows += static_cast<std::size_t>(sw.shapes[0].fields[0].rows[idx]);
  for (auto idx : sw.map.cell(0, 1, 3))
    rows += static_cast<std::size_t>(sw.shapes[0].fields[0].rows[idx]);
  check(x.size() == rows * 4, "the llm's first stage receives microbatch 3's rows of 4 floats");
}

void bind_file() {
  const small_plan sp;
  const auto& model = sp.model;
  const auto& cm = sp.cm;
  const auto& plan = sp.plan;
  const auto& batch = sp.batch;
  const auto map = disttrain::plan_sample_map(plan, cm, batch);
  std::vector<int> forwards(5);
  run_ranks(5, [&](disttrain::local_backend& backend) {
    const int my_rank = backend.rank();
    disttrain::executor<disttrain::local_backend> executor(backend);
    // The host's buffers, from the same bound rank (activation_buffers keep its routes).
    const auto t = disttrain::topology_of(plan, model);
    const auto prepared =
        disttrain::bind_rank(t, disttrain::chain_program(t, {.microbatches = 8}), map,
                             disttrain::plan_link_shapes(plan, cm, t, map, batch), my_rank);
    snippets::basic_bound_host<std::byte> host;  // plan_link_shapes: rows of bytes
    host.buf.reset(prepared);
    //! [bind_file]
    auto topo = disttrain::topology_of(plan, model);
    auto chain = disttrain::chain_program(topo, {.microbatches = 8});
    std::vector<disttrain::link_shape> shapes =  // one per link: hidden, bytes, rows per sample
        disttrain::plan_link_shapes(plan, cm, topo, map, batch);
    disttrain::bound_rank mine = disttrain::bind_rank(topo, chain, map, shapes, my_rank);
    executor.run(mine.program, host);  // host packs with mine.route_of(op)
    //! [bind_file]
    forwards[static_cast<std::size_t>(my_rank)] = host.forwards;
  });
  check(forwards == std::vector<int>(5, 8), "every rank ran its 8 forwards");
}

void heterogeneity_file() {
  //! [heterogeneity_file]
  auto sc = disttrain::presets::scenario_preset("mllm-7b");
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  disttrain::planner_options o;
  o.max_virtual_stages = 1;  // simulate_plan runs plain 1F1B
  auto req = disttrain::make_request(sc);
  auto ours = disttrain::plan_parallelism(cm, req, o);
  auto base = disttrain::plan_megatron_baseline(cm, req, o);
  auto h = disttrain::simulate_heterogeneity(base.plan, ours.plan, cm, sc.data, {.iterations = 4});
  double reordering = h.reordering_gain;  // (b) / (c)
  disttrain::json j = h;
  //! [heterogeneity_file]
  check(h.iterations == 4 && reordering > 0 && j.contains("reordering_gain"), "heterogeneity");
}

void heterogeneity_options() {
  //! [heterogeneity_options]
  disttrain::heterogeneity_options o{.iterations = 16, .seed = 7};
  //! [heterogeneity_options]
  check(o.iterations == 16 && o.seed == 7u, "heterogeneity_options");
}

void plan_for_data() {
  //! [plan_for_data]
  auto sc = disttrain::presets::scenario_preset("mllm-7b");
  sc.cluster.num_gpus = 16;
  sc.global_batch_size = 32;
  disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  auto req = disttrain::make_request(sc);
  // The mean iteration over sampled batches after the reorderer (the default
  // objective); data_objective::expected plans for the expected batch.
  disttrain::data_plan_result d = disttrain::plan_for_data(cm, req, sc.data);
  double mean = d.predicted.mean_s, p90 = d.predicted.p90_s;  // on the planner's own batches
  const disttrain::parallel_plan& plan = d.result.plan;       // plain 1F1B
  //! [plan_for_data]
  check(d.objective == disttrain::data_objective::sampled && mean > 0 && p90 >= d.predicted.min_s &&
            plan.global_batch == 32,
        "plan_for_data");
}

void data_plan_options() {
  //! [data_plan_options]
  disttrain::data_plan_options o{.objective = disttrain::data_objective::sampled,
                                 .batches = 16,    // 0: enough for 4096 samples, at least 8
                                 .finalists = 2};  // re-ranked by simulate_plan
  //! [data_plan_options]
  check(o.batches == 16 && o.finalists == 2, "data_plan_options");
}

void summarize_times() {
  //! [summarize_times]
  auto s = disttrain::summarize_times({1.0, 3.0, 2.0});  // median 2, p90 3
  //! [summarize_times]
  check(s.median_s == 2 && s.p90_s == 3 && s.mean_s == 2, "summarize_times");
}

void placement_file() {
  const two_module_map m;
  disttrain::reorderer<> reorderer(two_module_map::options());
  const auto batch = two_module_map::batch();
  const auto& layout = m.layout;
  const std::int64_t hidden = m.hidden;
  const auto tokens_of = two_module_map::tokens_of;
  //! [placement_file]
  disttrain::reorder_result res = reorderer.assign(batch);
  for (std::uint32_t j = 0; j < res.microbatches; ++j) {
    auto rp = disttrain::placements_for_route(res, j, /*from*/ 0, /*to*/ 1);
    disttrain::activation_shape shape{{}, hidden, 2};
    for (std::uint32_t idx : rp.samples) shape.rows.push_back(tokens_of(res.samples[idx].id));
    auto route = disttrain::plan_boundary_route(layout, 0, rp.from, rp.to, shape);
  }
  //! [placement_file]
  check(res == m.res, "the same map as two_module_map's");
}

void microbatch_samples() {
  const two_module_map m;
  const auto& res = m.res;
  //! [microbatch_samples]
  auto idx = disttrain::microbatch_samples(res, 2);
  std::uint64_t id_of_local_0 = res.samples[idx[0]].id;
  //! [microbatch_samples]
  for (std::size_t l = 1; l < idx.size(); ++l)
    check(res.samples[idx[l]].id > id_of_local_0, "local ids follow ascending sample ids");
}

void to_sample_placement() {
  const two_module_map m;
  const auto& res = m.res;
  const auto& layout = m.layout;
  const std::uint32_t j = 1;
  const auto shape = m.shape_of(j);
  //! [to_sample_placement]
  disttrain::sample_placement enc = disttrain::to_sample_placement(res, 0, j);
  disttrain::sample_placement llm = disttrain::to_sample_placement(res, 1, j);
  auto route = disttrain::plan_boundary_route(layout, 0, enc, llm, shape);
  //! [to_sample_placement]
  check(enc.dp() == 2 && llm.dp() == 3 && route.total_messages() > 0, "placements and route");
}

void route_placements() {
  const two_module_map m;
  const auto& res = m.res;
  const auto& layout = m.layout;
  const std::uint32_t j = 0;
  const auto shape = m.shape_of(j);
  //! [route_placements]
  disttrain::route_placements rp = disttrain::placements_for_route(res, j, 0, 1);
  auto plan = disttrain::plan_boundary_route(layout, 0, rp.from, rp.to, shape);
  //! [route_placements]
  check(rp.samples == disttrain::microbatch_samples(res, j) && plan.total_messages() > 0,
        "one local numbering");
}

void placements_for_route() {
  const two_module_map m;
  const auto& res = m.res;
  const std::uint32_t j = 2;
  //! [placements_for_route]
  auto rp = disttrain::placements_for_route(res, j, /*encoder*/ 0, /*backbone*/ 1);
  //! [placements_for_route]
  check(rp.from.num_samples() == rp.to.num_samples(), "both ends hold the same samples");
}

void microbatch_placement() {
  const two_module_map m;
  const auto& res = m.res;
  const auto& layout = m.layout;
  const std::uint32_t j = 1;
  const auto shape = m.shape_of(j);
  //! [microbatch_placement]
  auto mp = disttrain::microbatch_placements(res, j);
  auto route = disttrain::plan_boundary_route(layout, 0, mp.module[0], mp.module[1], shape);
  //! [microbatch_placement]
  check(mp.module[0].dp() == 2 && route.total_messages() > 0, "every module's placement");
}

void microbatch_placements() {
  const two_module_map m;
  const auto& res = m.res;
  const std::uint32_t j = 0;
  //! [microbatch_placements]
  const std::size_t mine[] = {0, 1};
  auto mp = disttrain::microbatch_placements(res, j, mine);  // modules 0 and 1 only
  //! [microbatch_placements]
  check(mp.module.size() == 2 && mp.module[1].dp() == 3, "modules 0 and 1");
}

void plan_reorder_file() {
  const small_plan sp;
  const auto& sc = sp.sc;
  const auto& plan = sp.plan;
  const auto& model = sc.model;
  const auto& cluster = sc.cluster;
  const disttrain::data_sampler sampler(sc.data);
  //! [plan_reorder_file]
  disttrain::analytic_cost_model cm(model, cluster);
  auto pr = disttrain::reorder_for_plan(plan, cm);  // plan: a parallel_plan
  disttrain::reorderer<> r(pr.options);
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(sampler.draw_batch(0, static_cast<std::size_t>(plan.global_batch)),
                            pr.cost, meta);
  disttrain::reorder_result res = r.assign(meta);  // res module k = pr.options.modules[k]
  //! [plan_reorder_file]
  check(res.samples.size() == 16 && res.microbatches == 8, "a map of the plan's batch");
}

void plan_segments() {
  const small_plan sp;
  const auto& plan = sp.plan;
  //! [plan_segments]
  disttrain::plan_segments s = disttrain::reorder_segments(plan);
  std::uint32_t k = s.segment_of[0];  // reorder module of plan module 0
  //! [plan_segments]
  check(k == 0 && s.options.modules.size() == 3, "three segments");
}

void reorder_segments() {
  const small_plan sp;
  const auto& plan = sp.plan;
  //! [reorder_segments]
  disttrain::reorderer<> r(disttrain::reorder_segments(plan).options);
  //! [reorder_segments]
  std::vector<disttrain::sample_meta> meta(16);
  for (std::size_t i = 0; i < meta.size(); ++i) {
    meta[i].id = i;
    meta[i].cost = {1, 2, 1};
  }
  check(r.assign(meta).microbatches == 8, "the plan's microbatches");
}

void reorder_for_plan() {
  const small_plan sp;
  const auto& cm = sp.cm;
  const auto& plan = sp.plan;
  const auto& samples = sp.samples;
  std::vector<disttrain::sample_meta> meta;
  //! [reorder_for_plan]
  auto pr = disttrain::reorder_for_plan(plan, cm);
  disttrain::describe_batch(samples, pr.cost, meta);  // meta[i].cost[k]: segment k
  //! [reorder_for_plan]
  check(meta.size() == 16 && meta[0].modules == 3 && meta[0].cost[1] > 0, "segment costs");
}

void sim_objective_file() {
  //! [sim_objective_file]
  auto sched = disttrain::add_communication(disttrain::make_interleaved_1f1b(4, 8, 2));
  disttrain::simulated_objective sim(sched);
  disttrain::reorder_options o;  // 4 stages of one module, 8 microbatches in groups of 4
  o.modules = {{"backbone", 1}};
  o.microbatches = 8;
  o.microbatch_group = 4;
  o.stages = disttrain::chain_stages(std::vector<std::uint32_t>{4});
  disttrain::reorderer<disttrain::simulated_objective> r(o, sim);
  //! [sim_objective_file]
  std::vector<disttrain::sample_meta> meta(16);
  for (std::size_t i = 0; i < meta.size(); ++i) {
    meta[i].id = i;
    meta[i].cost[0] = 1.0 + static_cast<double>(i % 4);
  }
  check(r.assign(meta).microbatches == 8, "reordered against the simulated schedule");
}

void simulated_objective() {
  std::vector<double> f(8 * 4, 1.0), b(8 * 4, 2.0);
  const disttrain::microbatch_times times{8, 4, f, b};
  //! [simulated_objective]
  disttrain::simulated_objective sim(disttrain::add_communication(disttrain::make_zb_h1(4, 8)),
                                     {.weight_fraction = 0.5});
  double T = sim(times);  // times: 8 microbatches x 4 stages
  //! [simulated_objective]
  check(T == 3 * 8 + 4 - 1, "ZB-H1 with F = B = W = 1: (3m + p - 1)");
}

void simulate_plan_file() {
  const auto sc = disttrain::presets::scenario_preset("mllm-7b");
  const disttrain::analytic_cost_model cm(sc.model, sc.cluster);
  const auto req = disttrain::make_request(sc);
  const disttrain::plan_result& result = mllm_7b_result();
  //! [simulate_plan_file]
  auto sim = disttrain::simulate_plan(result.plan, cm, req.sample_workload);
  disttrain::write_json_file("plan.trace.json",
                             disttrain::to_trace_json(sim.world, sim.result, &sim.topo));
  double t = sim.result.iteration_time;
  //! [simulate_plan_file]
  std::filesystem::remove("plan.trace.json");
  check(t > 0 && sim.world.programs.size() == static_cast<std::size_t>(result.plan.total_gpus()),
        "one program per GPU");
}

void plan_link_shapes() {
  const small_plan sp;
  const auto& model = sp.model;
  const auto& cm = sp.cm;
  const auto& plan = sp.plan;
  const auto& workloads = sp.batch;
  const auto topo = disttrain::topology_of(plan, model);
  const auto chain = disttrain::chain_program(topo, {.microbatches = 8});
  const auto map = disttrain::plan_sample_map(plan, cm, workloads);
  //! [plan_link_shapes]
  auto shapes = disttrain::plan_link_shapes(plan, cm, topo, map, workloads);
  auto world = disttrain::bind_world(topo, chain, map, shapes);
  //! [plan_link_shapes]
  check(shapes.size() == 3 && world.programs.size() == 5, "3 links, 5 ranks");
}

void plan_sample_map() {
  const small_plan sp;
  const auto& cm = sp.cm;
  const auto& plan = sp.plan;
  const auto& batch = sp.batch;
  //! [plan_sample_map]
  auto as_loaded = disttrain::plan_sample_map(plan, cm, batch, disttrain::sample_order::arrival);
  auto sim = disttrain::simulate_plan(plan, cm, batch, as_loaded);
  //! [plan_sample_map]
  check(sim.result.iteration_time > 0 && sim.map == as_loaded, "simulated on the arrival map");
}

void simulate_plan() {
  const small_plan sp;
  const auto& cm = sp.cm;
  const auto& plan = sp.plan;
  const auto& batch = sp.batch;
  //! [simulate_plan]
  auto map = disttrain::plan_sample_map(plan, cm, batch);  // or any reorder_result
  double t = disttrain::simulate_plan(plan, cm, batch, map).result.iteration_time;
  //! [simulate_plan]
  check(t == disttrain::simulate_plan(plan, cm, std::span(batch)).result.iteration_time,
        "the default map is plan_sample_map's");
}

void topology_views() {
  const small_plan sp;
  const auto& plan = sp.plan;
  const auto& model = sp.model;
  //! [topology_views]
  disttrain::topology topo = disttrain::topology_of(plan, model);
  disttrain::pipeline_schedule chain = disttrain::chain_program(topo, {.microbatches = 8});
  disttrain::reorderer<> r(disttrain::reorder_options_of(topo, 8));
  //! [topology_views]
  check(topo.world_size() == 5 && chain.num_stages == 4, "views");
}

void workload_cost_file() {
  const disttrain::data_sampler sampler(disttrain::presets::interleaved_image_text());
  //! [workload_cost_file]
  disttrain::analytic_cost_model cm(disttrain::presets::mllm_7b(),
                                    disttrain::presets::h800_cluster(64));
  disttrain::workload_cost cost(cm, {/*tp per module*/ 1, 4, 1});
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(sampler.draw_batch(0, 1024), cost, meta);
  //! [workload_cost_file]
  check(meta.size() == 1024 && meta[0].modules == 3, "1024 samples, 3 modules");
}

void workload_cost() {
  const small_plan sp;
  const auto& cm = sp.cm;
  const disttrain::sample& sample = sp.samples[0];
  //! [workload_cost]
  disttrain::workload_cost cost(cm);                       // TP 1 everywhere, column = model module
  disttrain::module_costs c = cost(sample);                // c.size() == cost.columns()
  disttrain::workload_cost seg(cm, {1, 4, 1}, {0, 0, 1});  // encoder folded into the backbone
  //! [workload_cost]
  check(c.size() == cost.columns() && seg.columns() == 2, "columns");
}

}  // namespace

int main() {
  snippets::runner r("bind");
  r.run("activation_buffers", activation_buffers);
  r.run("bind_file", bind_file);
  r.run("heterogeneity_file", heterogeneity_file);
  r.run("heterogeneity_options", heterogeneity_options);
  r.run("plan_for_data", plan_for_data);
  r.run("data_plan_options", data_plan_options);
  r.run("summarize_times", summarize_times);
  r.run("placement_file", placement_file);
  r.run("microbatch_samples", microbatch_samples);
  r.run("to_sample_placement", to_sample_placement);
  r.run("route_placements", route_placements);
  r.run("placements_for_route", placements_for_route);
  r.run("microbatch_placement", microbatch_placement);
  r.run("microbatch_placements", microbatch_placements);
  r.run("plan_reorder_file", plan_reorder_file);
  r.run("plan_segments", plan_segments);
  r.run("reorder_segments", reorder_segments);
  r.run("reorder_for_plan", reorder_for_plan);
  r.run("sim_objective_file", sim_objective_file);
  r.run("simulated_objective", simulated_objective);
  r.run("simulate_plan_file", simulate_plan_file);
  r.run("plan_link_shapes", plan_link_shapes);
  r.run("plan_sample_map", plan_sample_map);
  r.run("simulate_plan", simulate_plan);
  r.run("topology_views", topology_views);
  r.run("workload_cost_file", workload_cost_file);
  r.run("workload_cost", workload_cost);
  return r.finish();
}
