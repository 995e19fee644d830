#include <vector>

#include "disttrain/bind/workload_cost.hpp"
#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/reorder.hpp"
#include "disttrain_catch.hpp"

TEST_CASE("workload_cost prices samples with the cost model and drives the reorderer") {
  const auto model = disttrain::presets::mllm_7b();
  disttrain::analytic_cost_model cm(model, disttrain::presets::h800_cluster(64));
  disttrain::workload_cost cost(cm);
  static_assert(disttrain::sample_cost<disttrain::workload_cost<disttrain::analytic_cost_model>,
                                       disttrain::sample>);

  // Independent reference: the cost model on each module's workload of one sample.
  disttrain::sample s{
      .id = 3, .text_tokens = 200, .images = {{224, 224}, {448, 448}}, .generated = {{512, 512}}};
  const auto w = disttrain::workload_of(model, s);
  const auto c = cost(s);
  for (std::size_t k = 0; k < model.modules.size(); ++k) {
    disttrain::stage_config sc;
    sc.module = k;
    sc.num_layers = model.modules[k].layers();
    CHECK(c[k] == cm.stage_time(sc, w[k]).total_s());
    CHECK(c[k] > 0.0);
  }
  // More image pixels cost the encoder more; more text costs the backbone more.
  disttrain::sample big = s;
  big.images.push_back({896, 896});
  disttrain::sample longer = s;
  longer.text_tokens = 4000;
  CHECK(cost(big)[0] > c[0]);
  CHECK(cost(longer)[1] > c[1]);

  // A LAION-like batch through the reorderer.
  disttrain::data_sampler sampler(disttrain::presets::laion400m_like());
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(sampler.draw_batch(0, 96), cost, meta);
  disttrain::reorder_options o;
  for (std::size_t k = 0; k < model.modules.size(); ++k)
    o.modules.push_back({model.modules[k].name, static_cast<std::uint32_t>(k == 1 ? 3 : 2)});
  o.microbatches = 4;
  disttrain::reorderer<> r(o);
  const auto res = r.assign(meta);
  CHECK_NOTHROW(disttrain::validate(res));
  CHECK(res.imbalance[1] < 1.05);
}
