// The plan value type: validation naming fields, JSON round trip, its topology.
#include <string>

#include "disttrain/plan/format.hpp"
#include "disttrain/plan/json.hpp"
#include "disttrain/plan/layout.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain_catch.hpp"

using disttrain::errc;
using disttrain::module_plan;
using disttrain::parallel_plan;

namespace {
parallel_plan sample_plan() {
  parallel_plan p;
  p.global_batch = 64;
  p.num_microbatches = 8;
  p.modules = {module_plan{"vit", "encoder", 1, 1, 4, {32}},
               module_plan{"llm", "backbone", 4, 2, 2, {15, 17}, true},
               module_plan{"sd", "generator", 1, 2, 2, {12, 13}}};
  return p;
}
}  // namespace

TEST_CASE("plan accessors") {
  const auto p = sample_plan();
  CHECK(p.total_gpus() == 4 + 16 + 4);
  CHECK(p.microbatch_samples() == 8);
  CHECK(p.replica_samples(0) == 2);
  CHECK(p.replica_samples(1) == 4);
  CHECK(p.backbone_index() == 1);
  CHECK_NOTHROW(disttrain::validate(p));
  auto q = p;
  q.modules[0].dp = 3;  // ceil(8 / 3)
  CHECK(q.replica_samples(0) == 3);
  q.modules[0].colocated = true;  // colocated modules use the backbone's dp
  CHECK(q.replica_samples(0) == 4);
  CHECK(q.modules[0].gpus() == 0);
}

TEST_CASE("JSON round trip is exact and deterministic") {
  const auto p = sample_plan();
  const disttrain::json j = p;
  CHECK(j.at("total_gpus") == 24);
  CHECK(j.at("schedule") == "1f1b");
  const auto back = j.get<parallel_plan>();
  CHECK(back == p);
  CHECK(disttrain::json(back).dump() == j.dump());
  auto g = p;
  g.schedule = disttrain::plan_schedule::gpipe;
  CHECK(disttrain::json(g).get<parallel_plan>().schedule == disttrain::plan_schedule::gpipe);
  g.schedule = disttrain::plan_schedule::zb_h1;
  CHECK(disttrain::json(g).at("schedule") == "zb_h1");
  CHECK(disttrain::json(g).get<parallel_plan>().schedule == disttrain::plan_schedule::zb_h1);
}

TEST_CASE("malformed plan JSON names the field") {
  auto j = disttrain::json(sample_plan());
  j["modules"][1].erase("tp");
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.llm.tp");
  j = disttrain::json(sample_plan());
  j["modules"][0]["dp"] = "four";
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.vit.dp");
  j = disttrain::json(sample_plan());
  j["schedule"] = "zigzag";
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.schedule");
  j = disttrain::json(sample_plan());
  j.erase("num_microbatches");
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.num_microbatches");
  DISTTRAIN_CHECK_ERROR(disttrain::parse_json("{\"modules\": [", "plan.json"), errc::parse_error,
                        "plan.json");
  // Unknown keys (typos) are errors naming the key, with a suggestion.
  j = disttrain::json(sample_plan());
  j["overlap_grad_reduc"] = true;
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.overlap_grad_reduc");
  j = disttrain::json(sample_plan());
  j["modules"][1]["recomptue"] = true;
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.llm.recomptue");
  // 2.7 stages is not silently 2.
  j = disttrain::json(sample_plan());
  j["modules"][1]["pp"] = 2.7;
  DISTTRAIN_CHECK_ERROR(j.get<parallel_plan>(), errc::parse_error, "plan.llm.pp");
}

TEST_CASE("validate rejects inconsistent plans naming the field") {
  auto p = sample_plan();
  p.modules[1].tp = 3;
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.llm.tp");
  p = sample_plan();
  p.modules[1].tp = 16;  // more than a node
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.llm.tp");
  p = sample_plan();
  p.modules[2].layers = {25};
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.sd.layers");
  p = sample_plan();
  p.modules[0].dp = 9;  // more replicas than samples per microbatch
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.vit.dp");
  p = sample_plan();
  p.num_microbatches = 7;
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.num_microbatches");
  p = sample_plan();
  std::swap(p.modules[0], p.modules[1]);
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.vit.role");
  p = sample_plan();
  p.modules[1].role = "decoder";
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.llm.role");
  p = sample_plan();
  p.modules[0].colocated = true;  // colocated must use the backbone's dp
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.vit.dp");
  p.modules[0].dp = 2;
  p.modules[0].tp = 8;
  DISTTRAIN_CHECK_ERROR(disttrain::validate(p), errc::invalid_argument, "plan.vit.tp");
  p.modules[0].tp = 2;
  CHECK_NOTHROW(disttrain::validate(p));
}

TEST_CASE("topology_of: modules in pipeline order, colocated modules on the backbone") {
  using disttrain::module_id;
  auto p = sample_plan();
  p.modules[0].dp = 8;  // 8 GPUs: the backbone (tp 4) starts at rank 8
  const disttrain::topology t = disttrain::topology_of(p);
  REQUIRE(t.owning_modules().size() == 3);
  CHECK(t.world_size() == p.total_gpus());
  CHECK(t.base(module_id{1}) == 8);
  CHECK(t.module(module_id{1}).tp == 4);
  CHECK(t.module(module_id{1}).layers == p.modules[1].layers);
  auto q = p;
  q.modules[0] = module_plan{"vit", "encoder", 2, 1, 2, {32}, false, true};
  const disttrain::topology t2 = disttrain::topology_of(q);
  CHECK(t2.owning_modules().size() == 2);
  CHECK(t2.module(t2.owning_modules()[0]).name == "llm");
  CHECK(t2.module(module_id{0}).colocated);
  auto bad = sample_plan();
  bad.modules[0].dp = 2;  // the backbone would start at rank 2, not a multiple of tp 4
  DISTTRAIN_CHECK_ERROR(
      disttrain::require_tp_in_nodes(disttrain::topology_of(bad), bad.gpus_per_node, "plan"),
      errc::invalid_argument, "plan.llm.tp");
  disttrain::require_tp_in_nodes(t, p.gpus_per_node, "plan");
}

TEST_CASE("readable table") {
  CHECK(disttrain::format_layers({2, 5, 5, 5, 3}) == "2, 5x3, 3");
  CHECK(disttrain::format_layers({7}) == "7");
  const auto t = disttrain::format_plan(sample_plan());
  CHECK(t.find("24 GPUs, global batch 64 = 8 microbatches x 8 samples") != std::string::npos);
  CHECK(t.find("llm") != std::string::npos);
  CHECK(t.find("15, 17") != std::string::npos);
}
