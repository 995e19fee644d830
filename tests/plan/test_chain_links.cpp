// Several encoders (or generators) in one chain: which data edges each link
// carries (`links_of`), the fields simulate_plan binds for them, evaluate's
// closed form against simulate_plan, and the planner on the two-encoder preset.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "disttrain/bind/simulate_plan.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/evaluate.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"
#include "disttrain/schedule/validate_bound.hpp"
#include "disttrain_catch.hpp"

using disttrain::connection;
using disttrain::errc;
using disttrain::module_plan;
using disttrain::parallel_plan;

namespace {

// dual-7b: siglip (0), sam (1) -> llama (2) -> sd (3); both encoders on their own GPUs, SAM in
// two stages so that it forwards SigLIP's output between them.
parallel_plan dual_plan() {
  parallel_plan p;
  p.global_batch = 16;
  p.num_microbatches = 4;
  p.modules = {module_plan{"siglip-l-384", "encoder", 1, 1, 2, {24}},
               module_plan{"sam-b-1024", "encoder", 1, 2, 2, {6, 6}},
               module_plan{"llama-2-7b", "backbone", 2, 2, 2, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 2, {25}}};
  return p;
}

struct dual_setup {
  disttrain::scenario sc = disttrain::presets::scenario_preset("dual-7b");
  disttrain::analytic_cost_model cm{sc.model, disttrain::presets::cluster_preset("h800", 64)};
  disttrain::plan_request req = disttrain::make_request(sc.model, sc.data, 16, 256);
};

}  // namespace

TEST_CASE("links_of: a chain forwards the edges that skip a module") {
  const auto model = disttrain::presets::dual_7b();
  parallel_plan p = dual_plan();
  using V = std::vector<connection>;
  CHECK(disttrain::links_of(p, model, 0).after == V{{0, 2}});  // siglip -> sam carries siglip's
  CHECK(disttrain::links_of(p, model, 0).through.empty());
  CHECK(disttrain::links_of(p, model, 1).through == V{{0, 2}});        // forwarded inside sam
  CHECK(disttrain::links_of(p, model, 1).after == V{{0, 2}, {1, 2}});  // both into the backbone
  CHECK(disttrain::links_of(p, model, 2).through.empty());
  CHECK(disttrain::links_of(p, model, 2).after == V{{2, 3}});
  CHECK(disttrain::links_of(p, model, 3).after.empty());  // the last module
  // SigLIP colocated on the backbone's first stage: SAM forwards nothing.
  p.modules[0].colocated = true;
  p.modules[0].pp = 1;
  CHECK(disttrain::links_of(p, model, 1).through.empty());
  CHECK(disttrain::links_of(p, model, 1).after == V{{1, 2}});
  DISTTRAIN_CHECK_ERROR(disttrain::links_of(p, model, 0), errc::invalid_argument, "plan.modules");
  DISTTRAIN_CHECK_ERROR(disttrain::links_of(p, model, 4), errc::invalid_argument, "module");
  // One encoder, one generator: every link carries its one edge.
  const auto m7 = disttrain::presets::mllm_7b();
  parallel_plan q;
  q.modules = {module_plan{"vit-h-14", "encoder", 1, 1, 1, {32}},
               module_plan{"llama-2-7b", "backbone", 1, 2, 1, {16, 16}},
               module_plan{"sd-2.1-unet", "generator", 1, 1, 1, {25}}};
  CHECK(disttrain::links_of(q, m7, 0).after == V{{0, 1}});
  CHECK(disttrain::links_of(q, m7, 1).through.empty());
  CHECK(disttrain::links_of(q, m7, 1).after == V{{1, 2}});
}

TEST_CASE("simulate_plan binds one field per carried edge, and stays near evaluate") {
  dual_setup s;
  const parallel_plan p = dual_plan();
  const auto w = s.req.sample_workload;
  const auto sim = disttrain::simulate_plan(p, s.cm, w);
  CHECK_NOTHROW(disttrain::validate_bound(sim.world));
  // Links: siglip -> sam, sam 0 -> sam 1, sam -> llama, llama 0 -> llama 1, llama -> sd.
  REQUIRE(sim.shapes.size() == 5);
  auto names = [&](std::size_t l) {
    std::vector<std::string> v;
    for (const auto& f : sim.shapes[l].fields) v.push_back(f.name);
    return v;
  };
  using S = std::vector<std::string>;
  CHECK(names(0) == S{"siglip-l-384->llama-2-7b"});
  CHECK(names(1) == S{"activation", "siglip-l-384->llama-2-7b"});
  CHECK(names(2) == S{"siglip-l-384->llama-2-7b", "sam-b-1024->llama-2-7b"});
  CHECK(names(3) == S{"activation"});
  CHECK(names(4) == S{"llama-2-7b->sd-2.1-unet"});
  // A forwarded field carries the bytes of its edge (576 tokens x 4096 x 2 bytes per image).
  disttrain::model_workload one;
  one.size = w.size;
  one[0].sequences = 1;
  one[1].sequences = 1;
  const double per_image = s.cm.transfer_bytes(0, 2, one);
  CHECK(per_image == 576.0 * 4096 * 2);
  for (const std::size_t l : {std::size_t{0}, std::size_t{1}, std::size_t{2}}) {
    const auto& f = sim.shapes[l].fields[l == 1 ? 1 : 0];
    for (std::size_t i = 0; i < f.rows.size(); ++i)
      CHECK(f.rows[i] == static_cast<std::int64_t>(std::ceil(s.cm.transfer_bytes(0, 2, w) /
                                                             1024.0)));  // expected batch: equal
  }
  // evaluate prices the same links (the forwarded bytes in sam's hop and on sam -> llama): on the
  // expected batch the simulated iteration stays within the presets' band of the closed form.
  const auto e = disttrain::evaluate(p, s.cm, w);
  const double ratio = sim.result.iteration_time / e.iteration_time_s;
  INFO("simulated / evaluated = " << ratio);
  CHECK(ratio > 0.85);
  CHECK(ratio < 1.05);
}

TEST_CASE("a frozen encoder's forwarded output carries no gradient back") {
  dual_setup s;
  auto frozen = s.sc.model;
  frozen.modules[0].frozen = true;  // SigLIP frozen, SAM trains
  const disttrain::analytic_cost_model cf(frozen, disttrain::presets::cluster_preset("h800", 64));
  const auto sim = disttrain::simulate_plan(dual_plan(), cf, s.req.sample_workload);
  CHECK_NOTHROW(disttrain::validate_bound(sim.world));
  REQUIRE(sim.shapes.size() == 5);
  CHECK_FALSE(sim.shapes[1].fields[1].differentiable);  // forwarded inside SAM
  CHECK(sim.shapes[1].fields[0].differentiable);        // SAM's own activation
  CHECK_FALSE(sim.shapes[2].fields[0].differentiable);  // siglip -> llama
  CHECK(sim.shapes[2].fields[1].differentiable);        // sam -> llama
}

TEST_CASE("evaluate charges the forwarded edge on every link and hop it crosses") {
  dual_setup s;
  const auto w = s.req.sample_workload;
  const parallel_plan p = dual_plan();
  const auto with = disttrain::evaluate(p, s.cm, w);
  // The same model but SigLIP's output goes nowhere (connections without 0 -> 2): no link
  // carries it, so nothing else changes.
  auto cut = s.sc.model;
  cut.connections = {{1, 2}, {2, 3}};
  const disttrain::analytic_cost_model cc(cut, disttrain::presets::cluster_preset("h800", 64));
  const auto without = disttrain::evaluate(p, cc, w);
  REQUIRE(with.stages.size() == without.stages.size());
  // simulate_plan binds the link SigLIP -> SAM, which now carries nothing, as an empty field.
  const auto sim = disttrain::simulate_plan(p, cc, w);
  CHECK_NOTHROW(disttrain::validate_bound(sim.world));
  REQUIRE(sim.shapes.size() == 5);
  REQUIRE(sim.shapes[0].fields.size() == 1);
  CHECK(sim.shapes[0].fields[0].name == "none");
  CHECK(sim.shapes[2].fields.size() == 1);  // sam -> llama only
  for (std::size_t i = 0; i < with.stages.size(); ++i)
    CHECK(with.stages[i].time_s == without.stages[i].time_s);
  // SigLIP's edge crosses three places (siglip -> sam, sam's hop, sam -> llama), each both ways
  // (SigLIP trains) for a replica of 2 samples at TP 1: the fill path grows by at least six
  // times its bytes over the fastest link (p2p time is affine in the bytes).
  disttrain::model_workload two = w * 2.0;
  two.size = w.size;
  const double x = s.cm.transfer_bytes(0, 2, two);
  const double per_pass = s.cm.p2p_time(x, true) - s.cm.p2p_time(0.0, true);
  INFO("pipeline with " << with.pipeline_time_s << " s, without " << without.pipeline_time_s
                        << " s, one pass " << per_pass << " s");
  CHECK(per_pass > 0);
  CHECK(with.pipeline_time_s - without.pipeline_time_s >= 6 * per_pass * (1 - 1e-9));
}

TEST_CASE("the planner plans the two-encoder preset, disaggregated plans simulate") {
  dual_setup s;
  disttrain::planner_options opt;
  opt.include_monolithic = false;  // force the chain of separate modules
  opt.include_mixed = false;
  opt.max_side_pp = 2;
  const auto r = disttrain::plan_parallelism(s.cm, s.req, opt);
  INFO(disttrain::json(r.plan).dump());
  for (const auto& m : r.plan.modules) CHECK_FALSE(m.colocated);
  CHECK(r.plan.total_gpus() <= 64);
  // Its score is evaluate's, bit for bit.
  CHECK(disttrain::evaluate(r.plan, s.cm, s.req.sample_workload).iteration_time_s ==
        r.evaluation.iteration_time_s);
  const auto sim = disttrain::simulate_plan(r.plan, s.cm, s.req.sample_workload);
  CHECK_NOTHROW(disttrain::validate_bound(sim.world));
  CHECK(sim.result.iteration_time > 0);
  // And with the whole space, the baseline colocates both encoders on the first stage.
  const auto base = disttrain::plan_megatron_baseline(s.cm, s.req, {});
  CHECK(base.plan.modules[0].colocated);
  CHECK(base.plan.modules[1].colocated);
}
