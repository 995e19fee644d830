// Costs indexed over other modules than the reorder options are an error, not
// a silently wrong balance (issue 11): a plan whose encoder is colocated has
// two segments (backbone, generator), while a `workload_cost` without a
// column map prices the model's three modules.
#include <vector>

#include "disttrain/bind/workload_cost.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;

namespace {

disttrain::parallel_plan colocated_encoder_plan(const disttrain::model_spec& model) {
  disttrain::parallel_plan p;
  p.global_batch = 32;
  p.num_microbatches = 4;
  const int bb_layers = model.modules[1].layers();
  p.modules = {
      {model.modules[0].name, "encoder", 1, 1, 2, {model.modules[0].layers()}},
      {model.modules[1].name, "backbone", 4, 2, 2, {bb_layers / 2, bb_layers - bb_layers / 2}},
      {model.modules[2].name, "generator", 1, 1, 2, {model.modules[2].layers()}}};
  p.modules[0].colocated = true;
  disttrain::validate(p);
  return p;
}

}  // namespace

TEST_CASE("reorderer: model-indexed costs with segment options throw instead of mis-balancing") {
  const auto model = disttrain::presets::mllm_7b();
  disttrain::analytic_cost_model cm(model, disttrain::presets::h800_cluster(16));
  const disttrain::parallel_plan p = colocated_encoder_plan(model);

  // What a trainer writes by hand: one reorder module per non-colocated module.
  disttrain::reorder_options o;
  for (const auto& m : p.modules)
    if (!m.colocated) o.modules.push_back({m.name, static_cast<std::uint32_t>(m.dp)});
  o.microbatches = static_cast<std::uint32_t>(p.num_microbatches);
  REQUIRE(o.modules.size() == 2);

  // ... and the cost indexed by model module (encoder, backbone, generator).
  disttrain::workload_cost cost(cm, {1, 4, 1});
  disttrain::data_sampler sampler(disttrain::presets::laion400m_like());
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(sampler.draw_batch(0, 32), cost, meta);
  REQUIRE(meta.size() == 32);

  disttrain::reorderer<> r(o);
  DISTTRAIN_CHECK_ERROR(r.assign(meta), errc::invalid_argument, "batch[0].cost");

  // Hand-made metadata (module count unknown) with a cost past the options'
  // modules is rejected too, naming the entry.
  std::vector<disttrain::sample_meta> hand(8);
  for (std::size_t i = 0; i < hand.size(); ++i) {
    hand[i].id = i;
    hand[i].cost = {1.0, 2.0, i == 5 ? 3.0 : 0.0};
  }
  DISTTRAIN_CHECK_ERROR(r.assign(hand), errc::invalid_argument, "batch[5].cost[2]");
  for (auto& h : hand) h.cost[2] = 0.0;
  CHECK_NOTHROW(disttrain::validate(r.assign(hand)));
}
