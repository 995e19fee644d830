#include <cstdint>
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
