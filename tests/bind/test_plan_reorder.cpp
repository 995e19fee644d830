#include <cstdint>
#include <random>
#include <vector>

#include "disttrain/bind/plan_reorder.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/reorder/assignment.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;

namespace {

disttrain::parallel_plan plan_7b(const disttrain::model_spec& model, bool colocate_encoder) {
  disttrain::parallel_plan p;
  p.global_batch = 32;
  p.num_microbatches = 4;
  p.modules = {{model.modules[0].name, "encoder", 1, 1, 2, {model.modules[0].layers()}},
               {model.modules[1].name, "backbone", 4, 2, 2, {8, model.modules[1].layers() - 8}},
               {model.modules[2].name, "generator", 1, 1, 4, {model.modules[2].layers()}}};
  p.modules[0].colocated = colocate_encoder;
  return p;
}

double whole_module_seconds(const disttrain::analytic_cost_model& cm, std::size_t k, int tp,
                            const disttrain::sample& s) {
  disttrain::stage_config sc;
  sc.module = k;
  sc.num_layers = cm.model().modules[k].layers();
  sc.tp = tp;
  return cm.stage_time(sc, disttrain::workload_of(cm.model(), s)[k]).total_s();
}

}  // namespace

TEST_CASE("reorder_for_plan: a colocated encoder's seconds go to the backbone segment") {
  const auto model = disttrain::presets::mllm_7b();
  disttrain::analytic_cost_model cm(model, disttrain::presets::h800_cluster(16));
  const auto p = plan_7b(model, true);
  const auto pr = disttrain::reorder_for_plan(p, cm);

  REQUIRE(pr.options.modules.size() == 2);
  CHECK(pr.options.modules[0] == disttrain::reorder_module{model.modules[1].name, 2});
  CHECK(pr.options.modules[1] == disttrain::reorder_module{model.modules[2].name, 4});
  CHECK(pr.segment_of == std::vector<std::uint32_t>{0, 0, 1});
  CHECK(pr.options.microbatches == 4);
  const double first = 8.0 / model.modules[1].layers();
  REQUIRE(pr.options.stages.size() == 3);
  CHECK(pr.options.stages[0] == disttrain::pipeline_stage{0, first, 2.0 * first});
  CHECK(pr.options.stages[1].module == 0);
  CHECK(pr.options.stages[1].forward_scale == Approx(1.0 - first));
  CHECK(pr.options.stages[2] == disttrain::pipeline_stage{1, 1.0, 2.0});
  CHECK(pr.cost.columns() == 2);

  const disttrain::sample s{
      .id = 1, .text_tokens = 300, .images = {{448, 448}, {224, 224}}, .generated = {{512, 512}}};
  const auto c = pr.cost(s);
  REQUIRE(c.size() == 2);
  const double enc = whole_module_seconds(cm, 0, 1, s);
  const double bb = whole_module_seconds(cm, 1, 4, s);
  const double gen = whole_module_seconds(cm, 2, 1, s);
  CHECK(enc > 0.0);
  CHECK(c[0] == Approx(enc + bb).epsilon(1e-12));
  CHECK(c[1] == gen);

  // The derived pair drives the reorderer; a sample's backbone replica is its
  // encoder replica (one cell per segment).
  disttrain::data_sampler sampler(disttrain::presets::laion400m_like());
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(sampler.draw_batch(0, static_cast<std::size_t>(p.global_batch)),
                            pr.cost, meta);
  disttrain::reorderer<> r(pr.options);
  const auto res = r.assign(meta);
  CHECK_NOTHROW(disttrain::validate(res));
  CHECK(res.imbalance[0] < 1.2);

  // The segment options with a model-indexed cost: an error naming the field.
  disttrain::workload_cost per_model(cm, {1, 4, 1});
  disttrain::describe_batch(sampler.draw_batch(0, static_cast<std::size_t>(p.global_batch)),
                            per_model, meta);
  DISTTRAIN_CHECK_ERROR(r.assign(meta), errc::invalid_argument, "batch[0].cost");
}

TEST_CASE("reorder_for_plan: a disaggregated plan keeps one segment per module") {
  const auto model = disttrain::presets::mllm_7b();
  disttrain::analytic_cost_model cm(model, disttrain::presets::h800_cluster(16));
  const auto pr = disttrain::reorder_for_plan(plan_7b(model, false), cm);
  REQUIRE(pr.options.modules.size() == 3);
  CHECK(pr.options.modules[0].dp == 2);
  CHECK(pr.segment_of == std::vector<std::uint32_t>{0, 1, 2});
  const disttrain::sample s{.id = 1, .text_tokens = 100, .images = {{224, 224}}, .generated = {}};
  const auto c = pr.cost(s);
  REQUIRE(c.size() == 3);
  CHECK(c[0] == whole_module_seconds(cm, 0, 1, s));
  CHECK(c[1] == whole_module_seconds(cm, 1, 4, s));
}

TEST_CASE("reorder_for_plan: plan and model must name the same modules") {
  const auto model = disttrain::presets::mllm_7b();
  disttrain::analytic_cost_model cm(model, disttrain::presets::h800_cluster(16));
  auto p = plan_7b(model, false);
  p.modules[2].name = "unet";
  DISTTRAIN_CHECK_ERROR(disttrain::reorder_for_plan(p, cm), errc::invalid_argument,
                        "plan.modules[2].name");
  p.modules.pop_back();
  DISTTRAIN_CHECK_ERROR(disttrain::reorder_for_plan(p, cm), errc::invalid_argument, "plan.modules");
  // A bad plan is reported by the plan's own validation.
  auto bad = plan_7b(model, true);
  bad.modules[0].dp = 3;
  DISTTRAIN_CHECK_ERROR(disttrain::reorder_segments(bad), errc::invalid_argument,
                        "plan.vit-h-14.dp");
}

TEST_CASE("workload_cost: column map errors name the field") {
  const auto model = disttrain::presets::mllm_7b();
  disttrain::analytic_cost_model cm(model, disttrain::presets::h800_cluster(16));
  using wc = disttrain::workload_cost<disttrain::analytic_cost_model>;
  DISTTRAIN_CHECK_ERROR(wc(cm, {}, {0, 1}), errc::invalid_argument, "workload_cost.column_of");
  DISTTRAIN_CHECK_ERROR(wc(cm, {}, {0, 2, 2}), errc::invalid_argument, "workload_cost.column_of");
  DISTTRAIN_CHECK_ERROR(wc(cm, {}, {0, 9, 1}), errc::invalid_argument,
                        "workload_cost.column_of[1]");
  CHECK(wc(cm, {}, {1, 0, 1}).columns() == 2);
}

TEST_CASE("reorder options: one derivation, from a plan or its topology (issue 40)") {
  // reorder_segments(plan) weighted a module's stages by their layers, and
  // reorder_options_of(topology) weighted them equally, so a sampler built
  // from the plan's topology (disttrain.torch.BatchSampler) and simulate_plan
  // scored the same microbatch order differently. Now the topology carries
  // the layers per stage and both go through reorder_options_of.
  const auto model = disttrain::presets::mllm_7b();
  for (const bool colocated : {false, true}) {
    const auto p = plan_7b(model, colocated);
    const disttrain::topology t = disttrain::topology_of(p);
    CHECK(t.module(t.backbone()).layers == p.modules[1].layers);
    const auto from_plan = disttrain::reorder_segments(p).options;
    const auto from_topology = disttrain::reorder_options_of(t, 4);
    CHECK(from_plan == from_topology);
    const double first = 8.0 / model.modules[1].layers();
    const std::size_t bb = colocated ? 0 : 1;  // the backbone's first stage
    REQUIRE(from_topology.stages.size() > bb);
    CHECK(from_topology.stages[bb] ==
          disttrain::pipeline_stage{static_cast<std::uint32_t>(bb), first, 2.0 * first});
    // The same order scores the same, bit for bit.
    std::mt19937_64 rng(40);
    std::vector<disttrain::sample_meta> batch(64);
    for (std::size_t i = 0; i < batch.size(); ++i) {
      batch[i].id = i;
      for (std::size_t k = 0; k < from_plan.modules.size(); ++k)
        batch[i].cost[k] = 0.01 + static_cast<double>(rng() % 1000) * 1e-4;
    }
    auto fixed = [](disttrain::reorder_options o) {
      o.order = disttrain::order_method::identity;
      o.slots = disttrain::slot_policy::arrival;
      return o;
    };
    CHECK(disttrain::reorderer<>(fixed(from_plan)).assign(batch).iteration_time ==
          disttrain::reorderer<>(fixed(from_topology)).assign(batch).iteration_time);
  }
  // A topology written by hand, without layers: equal stages (chain_stages).
  const disttrain::topology hand({{"vit", disttrain::module_role::encoder, 1, 1, 2},
                                  {"llm", disttrain::module_role::backbone, 2, 3, 2}});
  CHECK(disttrain::reorder_options_of(hand, 6).stages ==
        disttrain::chain_stages(std::vector<std::uint32_t>{1, 3}));
  CHECK(disttrain::stage_share(hand.module(hand.backbone()), disttrain::stage_id{2}) == 1.0 / 3.0);
  // Layers that do not match the stages: located errors.
  using role = disttrain::module_role;
  DISTTRAIN_CHECK_ERROR(disttrain::topology({{"llm", role::backbone, 1, 2, 1, true, false, {4}}}),
                        errc::invalid_argument, "topology.modules[0].layers");
  DISTTRAIN_CHECK_ERROR(
      disttrain::topology({{"llm", role::backbone, 1, 2, 1, true, false, {4, 0}}}),
      errc::invalid_argument, "topology.modules[0].layers[1]");
}
