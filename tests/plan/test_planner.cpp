// Planner and baseline on the scenario presets: feasibility, the baseline is
// never better, determinism, and the documented errors.
#include <cstring>
#include <string>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/presets.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain_catch.hpp"
#include "mock_cost.hpp"

using disttrain::errc;

namespace {

struct setup {
  disttrain::scenario sc;
  disttrain::analytic_cost_model cm;
  disttrain::plan_request req;
  setup(const char* preset, int gpus, int batch)
      : sc(disttrain::presets::scenario_preset(preset)),
        cm(sc.model,
           [&] {
             auto c = sc.cluster;
             c.num_gpus = gpus;
             return c;
           }()),
        req(disttrain::make_request(sc.model, sc.data, batch, 512)) {}
};

void check_feasible(const disttrain::plan_result& r, const disttrain::analytic_cost_model& cm,
                    const disttrain::plan_request& req) {
  // The plan scores the same through the public evaluate, fits memory and the cluster.
  const auto e = disttrain::evaluate(r.plan, cm, req.sample_workload);
  CHECK(e.iteration_time_s == r.evaluation.iteration_time_s);
  CHECK(e.max_memory_bytes <= e.memory_limit_bytes);
  for (const auto& s : e.stages) CHECK(s.memory_bytes <= cm.memory_limit());
  CHECK(r.plan.total_gpus() <= cm.cluster().num_gpus);
  CHECK(r.plan.global_batch == req.global_batch);
  const auto L = disttrain::topology_of(r.plan);
  CHECK(L.world_size() == r.plan.total_gpus());
  CHECK_NOTHROW(disttrain::require_tp_in_nodes(L, r.plan.gpus_per_node, "plan"));
  CHECK(e.mfu > 0);
  CHECK(e.mfu < 1);
}

}  // namespace

TEST_CASE("plans of the presets are feasible and never worse than the baseline") {
  const struct {
    const char* preset;
    int gpus, batch;
  } cases[] = {{"mllm-7b", 64, 256}, {"mllm-13b", 128, 256}, {"mllm-70b", 96, 64}};
  for (const auto& c : cases) {
    INFO(c.preset << " on " << c.gpus);
    setup s(c.preset, c.gpus, c.batch);
    const auto ours = disttrain::plan_parallelism(s.cm, s.req);
    const auto base = disttrain::plan_megatron_baseline(s.cm, s.req);
    check_feasible(ours, s.cm, s.req);
    check_feasible(base, s.cm, s.req);
    CHECK(ours.evaluation.iteration_time_s <= base.evaluation.iteration_time_s);
    // The baseline is monolithic with Megatron's even split.
    for (const auto& m : base.plan.modules) {
      if (m.role == "backbone") {
        for (int c2 : m.layers) CHECK(c2 == m.layers.front());
      } else {
        CHECK(m.colocated);
      }
    }
  }
}

TEST_CASE("the planner is deterministic bit for bit") {
  setup a("mllm-13b", 96, 128);
  setup b("mllm-13b", 96, 128);
  const auto r1 = disttrain::plan_parallelism(a.cm, a.req);
  const auto r2 = disttrain::plan_parallelism(b.cm, b.req);
  const auto r3 = disttrain::plan_parallelism(a.cm, a.req);
  CHECK(r1.plan == r2.plan);
  CHECK(r1.plan == r3.plan);
  CHECK(disttrain::json(r1.plan).dump() == disttrain::json(r2.plan).dump());
  CHECK(std::memcmp(&r1.evaluation.iteration_time_s, &r2.evaluation.iteration_time_s,
                    sizeof(double)) == 0);
  // Listing the TP candidates in another order does not change the answer.
  disttrain::planner_options o;
  o.tp_candidates = {8, 2, 4, 1, 2};
  CHECK(disttrain::plan_parallelism(a.cm, a.req, o).plan == r1.plan);
}

TEST_CASE("the search space options are honoured") {
  setup s("mllm-7b", 32, 64);
  disttrain::planner_options o;
  o.tp_candidates = {1, 2};
  o.max_backbone_pp = 2;
  o.max_side_pp = 1;
  o.search_recompute = false;
  o.include_monolithic = false;
  o.include_mixed = false;
  const auto r = disttrain::plan_parallelism(s.cm, s.req, o);
  for (const auto& m : r.plan.modules) {
    CHECK(m.tp <= 2);
    CHECK(!m.recompute);
    CHECK(!m.colocated);
    CHECK(m.pp <= (m.role == "backbone" ? 2 : 1));
  }
  check_feasible(r, s.cm, s.req);
  {
    // Mixed layouts (one side module colocated) are a superset: never slower, never both colocated.
    auto om = o;
    om.include_mixed = true;
    const auto rm = disttrain::plan_parallelism(s.cm, s.req, om);
    int colocated = 0;
    for (const auto& m : rm.plan.modules) colocated += m.colocated ? 1 : 0;
    CHECK(colocated <= 1);
    CHECK(rm.evaluation.iteration_time_s <= r.evaluation.iteration_time_s);
    check_feasible(rm, s.cm, s.req);
  }
  // A lower bound on the backbone's stages.
  o.min_backbone_pp = 2;
  const auto r2 = disttrain::plan_parallelism(s.cm, s.req, o);
  CHECK(r2.plan.modules[r2.plan.backbone_index()].pp == 2);
  CHECK(r2.evaluation.iteration_time_s >= r.evaluation.iteration_time_s);
  check_feasible(r2, s.cm, s.req);
}

TEST_CASE("a plan from the mock model: planner agrees with evaluate on another cost model") {
  disttrain::testing::mock_cost cm(16);
  disttrain::plan_request req{8, disttrain::testing::mock_sample()};
  disttrain::planner_options o;
  o.max_backbone_pp = 4;
  const auto r = disttrain::plan_parallelism(cm, req, o);
  CHECK(disttrain::evaluate(r.plan, cm, req.sample_workload).iteration_time_s ==
        r.evaluation.iteration_time_s);
  CHECK(r.plan.total_gpus() <= 16);
}

TEST_CASE("infeasible requests name the limit") {
  // A 70B backbone does not fit on 8 GPUs.
  setup s("mllm-70b", 8, 64);
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, s.req), errc::infeasible,
                        "llama-3-70b/stage");
  DISTTRAIN_CHECK_ERROR(disttrain::plan_megatron_baseline(s.cm, s.req), errc::infeasible,
                        "llama-3-70b/stage");
  // Disaggregated layouts need a GPU per module.
  setup t("mllm-7b", 2, 8);
  disttrain::planner_options o;
  o.include_monolithic = false;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(t.cm, t.req, o), errc::infeasible,
                        "cluster.num_gpus");
}

TEST_CASE("malformed requests and options name the field") {
  setup s("mllm-7b", 16, 16);
  auto req = s.req;
  req.global_batch = 0;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, req), errc::invalid_argument,
                        "request.global_batch");
  req = s.req;
  req.sample_workload.size = 2;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, req), errc::invalid_argument,
                        "request.sample_workload");
  disttrain::planner_options o;
  o.max_side_pp = 0;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, s.req, o), errc::invalid_argument,
                        "planner.max_side_pp");
  o = {};
  o.min_backbone_pp = 0;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, s.req, o), errc::invalid_argument,
                        "planner.min_backbone_pp");
  o.min_backbone_pp = 3;
  o.max_backbone_pp = 2;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, s.req, o), errc::invalid_argument,
                        "planner.min_backbone_pp");
  o = {};
  o.tp_candidates = {3};
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, s.req, o), errc::invalid_argument,
                        "planner.tp_candidates");
  o = {};
  o.include_monolithic = o.include_disaggregated = false;
  DISTTRAIN_CHECK_ERROR(disttrain::plan_parallelism(s.cm, s.req, o), errc::invalid_argument,
                        "planner");
  DISTTRAIN_CHECK_ERROR(disttrain::make_request(s.sc.model, s.sc.data, -1), errc::invalid_argument,
                        "global_batch_size");
}
