// Spec validation and JSON: bad inputs name the field.
#include <string>

#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

TEST_CASE("architectures reject bad fields naming them") {
  decoder_llm_arch l = std::get<decoder_llm_arch>(presets::llama3_8b().arch);
  l.layers = 0;
  DISTTRAIN_CHECK_ERROR(l.validate("llm"), errc::invalid_argument, "llm.layers");
  l = std::get<decoder_llm_arch>(presets::llama3_8b().arch);
  l.heads = 30;  // does not divide 4096
  DISTTRAIN_CHECK_ERROR(l.validate("llm"), errc::invalid_argument, "llm.heads");
  l = std::get<decoder_llm_arch>(presets::llama3_8b().arch);
  l.kv_heads = 5;
  DISTTRAIN_CHECK_ERROR(l.validate("llm"), errc::invalid_argument, "llm.kv_heads");
  l = std::get<decoder_llm_arch>(presets::llama3_8b().arch);
  l.mlp = -4;
  DISTTRAIN_CHECK_ERROR(l.validate("llm"), errc::invalid_argument, "llm.mlp");

  vit_encoder_arch v;
  v.patch_size = 300;
  DISTTRAIN_CHECK_ERROR(v.validate("enc"), errc::invalid_argument, "enc.patch_size");
  diffusion_arch d = std::get<diffusion_arch>(presets::sd21_unet().arch);
  d.params = 0;
  DISTTRAIN_CHECK_ERROR(d.validate("gen"), errc::invalid_argument, "gen.params");
}

TEST_CASE("model structure is validated") {
  auto m = presets::mllm_7b();
  CHECK_NOTHROW(m.validate());
  auto dup = m;
  dup.modules[2].name = dup.modules[0].name;
  DISTTRAIN_CHECK_ERROR(dup.validate(), errc::invalid_argument, "model.modules[2].name");
  auto no_bb = m;
  no_bb.modules.erase(no_bb.modules.begin() + 1);
  DISTTRAIN_CHECK_ERROR(no_bb.validate(), errc::invalid_argument, "model.modules");
  auto order = m;
  std::swap(order.modules[0], order.modules[2]);
  DISTTRAIN_CHECK_ERROR(order.validate(), errc::invalid_argument, "role");
  auto wrong_role = m;
  wrong_role.modules[0].role = module_role::generator;
  DISTTRAIN_CHECK_ERROR(wrong_role.validate(), errc::invalid_argument, "model.modules[0].role");
  auto bad_edge = m;
  bad_edge.connections = {{2, 1}};
  DISTTRAIN_CHECK_ERROR(bad_edge.validate(), errc::invalid_argument, "model.connections[0]");
  auto deep = m;
  deep.modules[1].arch = decoder_llm_arch{.layers = 0};
  DISTTRAIN_CHECK_ERROR(deep.validate(), errc::invalid_argument, "model.modules[1].arch.layers");
}

TEST_CASE("input gradients flow only where an upstream module trains") {
  auto m = presets::mllm_7b();
  m.modules[0].frozen = true;  // frozen encoder: nothing upstream of it
  CHECK_FALSE(m.input_grad_required(0));
  CHECK_FALSE(m.input_grad_required(1));  // backbone: its only upstream (encoder) is frozen
  CHECK(m.input_grad_required(2));        // generator: the backbone trains
  m.modules[0].frozen = false;
  m.modules[1].frozen = true;
  CHECK(m.input_grad_required(1));  // frozen backbone still passes gradients to the encoder
}

TEST_CASE("clusters reject negative sizes naming the field") {
  auto c = presets::h800_cluster(16);
  c.gpu.hbm_bytes = -1;
  DISTTRAIN_CHECK_ERROR(c.validate(), errc::invalid_argument, "cluster.gpu.hbm_bytes");
  c = presets::h800_cluster(16);
  c.gpus_per_node = 0;
  DISTTRAIN_CHECK_ERROR(c.validate(), errc::invalid_argument, "cluster.gpus_per_node");
  c = presets::h800_cluster(16);
  c.inter_node_latency_s = -1e-6;
  DISTTRAIN_CHECK_ERROR(c.validate(), errc::invalid_argument, "cluster.inter_node_latency_s");
  DISTTRAIN_CHECK_ERROR(presets::cluster_preset("h800", 0), errc::invalid_argument, "num_gpus");
}

TEST_CASE("specs round-trip through JSON") {
  for (const auto& n : presets::scenario_preset_names()) {
    const auto sc = presets::scenario_preset(n);
    const json j = sc;
    const auto back = j.get<scenario>();
    CHECK(json(back) == j);
    CHECK(back.model.modules.size() == sc.model.modules.size());
  }
  auto d = presets::laion400m_like();
  d.records = {sample{.id = 0, .text_tokens = 5, .images = {{10, 20}}, .generated = {}}};
  const json dj = d;
  CHECK(dj.get<data_spec>().records == d.records);
}

TEST_CASE("malformed or incomplete JSON names the field") {
  DISTTRAIN_CHECK_ERROR(parse_json("{\"model\": ", "cfg.json"), errc::parse_error, "cfg.json");
  json j = presets::scenario_preset("mllm-7b");
  auto missing = j;
  missing["model"]["modules"][1]["arch"].erase("layers");
  DISTTRAIN_CHECK_ERROR(missing.get<scenario>(), errc::parse_error, "model.modules[1].arch.layers");
  auto wrong_type = j;
  wrong_type["cluster"]["gpu"]["hbm_bytes"] = "lots";
  DISTTRAIN_CHECK_ERROR(wrong_type.get<scenario>(), errc::parse_error, "cluster.gpu.hbm_bytes");
  auto negative = j;
  negative["cluster"]["num_gpus"] = -8;
  DISTTRAIN_CHECK_ERROR(negative.get<scenario>(), errc::invalid_argument, "cluster.num_gpus");
  auto zero_layers = j;
  zero_layers["model"]["modules"][0]["arch"]["layers"] = 0;
  DISTTRAIN_CHECK_ERROR(zero_layers.get<scenario>(), errc::invalid_argument,
                        "model.modules[0].arch.layers");
  auto bad_heads = j;
  bad_heads["model"]["modules"][1]["arch"]["heads"] = 7;
  DISTTRAIN_CHECK_ERROR(bad_heads.get<scenario>(), errc::invalid_argument,
                        "model.modules[1].arch.heads");
  auto bad_kind = j;
  bad_kind["data"]["text_tokens"]["kind"] = "zipf";
  DISTTRAIN_CHECK_ERROR(bad_kind.get<scenario>(), errc::parse_error, "data.text_tokens.kind");
  auto bad_hist = j;
  bad_hist["data"]["images_per_sample"]["weights"][0] = -1;
  DISTTRAIN_CHECK_ERROR(bad_hist.get<scenario>(), errc::invalid_argument,
                        "data.images_per_sample.weights[0]");
  auto bad_batch = j;
  bad_batch["global_batch_size"] = 0;
  DISTTRAIN_CHECK_ERROR(bad_batch.get<scenario>(), errc::invalid_argument, "global_batch_size");
  auto bad_role = j;
  bad_role["model"]["modules"][2]["role"] = "decoder";
  DISTTRAIN_CHECK_ERROR(bad_role.get<scenario>(), errc::parse_error, "model.modules[2].role");
  try {
    (void)bad_role.get<scenario>();
    FAIL("no throw");
  } catch (const disttrain::error& e) {
    CHECK(std::string(e.message()).find("(valid: \"encoder\", \"backbone\", \"generator\")") !=
          std::string::npos);
  }
  for (const disttrain::module_role r : disttrain::module_roles) {
    CHECK(json(r) == std::string(disttrain::to_string(r)));
    CHECK(json(r).get<disttrain::module_role>() == r);
  }
  auto bad_sample = json{
      {"records",
       json::array({json{{"text_tokens", 3}, {"images", json::array({json::array({0, 5})})}}})}};
  DISTTRAIN_CHECK_ERROR(bad_sample.get<data_spec>(), errc::invalid_argument,
                        "data.records[0].images[0].height");
}
