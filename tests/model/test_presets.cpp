// Presets against published parameter counts and FLOPs.
#include <cmath>
#include <string>

#include "disttrain/cost.hpp"
#include "disttrain/model.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
double rel(double a, double b) { return std::abs(a - b) / std::abs(b); }
}  // namespace

TEST_CASE("parameter counts match published figures") {
  struct ref {
    const char* name;
    double published;
    double tolerance;
  };
  // Sources: Llama 3 paper / HF configs (8.03B, 70.6B), Qwen2 report (72.71B),
  // Llama 2 paper (6.74B, 13.02B), ViT-H/14 (632M), InternVL (5.9B),
  // SD-2.1 UNet (865.9M, given), DiT paper (675M).
  const ref refs[] = {
      {"llama-3-8b", 8.03e9, 0.01},  {"llama-3-70b", 70.6e9, 0.01},  {"qwen2-72b", 72.71e9, 0.01},
      {"llama-2-7b", 6.74e9, 0.01},  {"llama-2-13b", 13.02e9, 0.01}, {"vit-h-14", 632e6, 0.01},
      {"internvit-6b", 5.9e9, 0.02}, {"sd-2.1-unet", 865.9e6, 1e-9}, {"dit-xl-2", 675e6, 0.01}};
  for (const auto& r : refs) {
    INFO(r.name);
    const auto m = presets::module_preset(r.name);
    CHECK(rel(module_params(m), r.published) < r.tolerance);
  }
}

TEST_CASE("Llama-3-70B parameters equal an independent hand count") {
  const double h = 8192, kv = 1024, mlp = 28672, v = 128256, L = 80;
  const double per_layer =
      2 * h * h + 2 * h * kv + 3 * h * mlp + 2 * h;    // q,o + k,v + SwiGLU + 2 RMSNorm
  const double total = L * per_layer + 2 * v * h + h;  // embedding, head, final norm
  CHECK(module_params(presets::llama3_70b()) == Approx(total).epsilon(1e-12));
  CHECK(total == Approx(70.55e9).epsilon(0.001));
}

TEST_CASE("ViT-H/14 forward FLOPs per 224x224 image match the ViT literature") {
  // timm / fvcore report 167.4 GMACs for ViT-H/14 at 224^2 (257 tokens); 1 MAC = 2 FLOPs.
  const auto vit = presets::vit_h_14();
  const auto& a = std::get<vit_encoder_arch>(vit.arch);
  const int t = encoder_tokens(a, {224, 224});
  CHECK(t == 257);
  const double fwd = shape_of(vit).forward_flops(t, static_cast<double>(t) * t);
  CHECK(rel(fwd, 2 * 167.4e9) < 0.01);
}

TEST_CASE("DiT-XL/2 and SD-2.1 forward FLOPs per image match their papers") {
  // DiT paper Table 4: 118.6 GFLOPs (multiply-adds) at 256^2 = 256 latent tokens.
  const auto dit = presets::dit_xl_2();
  const int t = latent_tokens(std::get<diffusion_arch>(dit.arch), {256, 256});
  CHECK(t == 256);
  CHECK(rel(shape_of(dit).forward_flops(t, 256.0 * 256.0), 2 * 118.6e9) < 0.01);
  // BK-SDM: 339 GMACs per UNet forward at 512^2 = 4096 latent tokens.
  const auto sd = presets::sd21_unet();
  const int ts = latent_tokens(std::get<diffusion_arch>(sd.arch), {512, 512});
  CHECK(ts == 4096);
  CHECK(rel(shape_of(sd).forward_flops(ts, 4096.0 * 4096.0), 2 * 339e9) < 0.01);
}

TEST_CASE("dense LLM training FLOPs are 6 N tokens plus attention (PaLM / Megatron formula)") {
  for (const char* name : {"llama-3-8b", "llama-3-70b", "qwen2-72b", "llama-2-7b"}) {
    INFO(name);
    const auto mod = presets::module_preset(name);
    const auto& a = std::get<decoder_llm_arch>(mod.arch);
    model_spec m{.name = "solo", .modules = {mod}};
    analytic_cost_model cm(m, presets::h100_cluster(8));
    const double s = 4096;  // one sequence
    module_workload w;
    w.add_sequence(s);
    const auto f = cm.flops(stage_config{0, 0, a.layers, 1, 1, false}, w);
    // N = matmul parameters (layers + LM head); attention 12 L h s per token.
    const double h = a.hidden, kv = h / a.heads * a.kv_heads;
    const double n_mm = a.layers * (2 * h * h + 2 * h * kv + 3 * h * a.mlp) + h * a.vocab;
    const double expected = 6 * n_mm * s + 12.0 * a.layers * h * s * s;
    CHECK(f.total() == Approx(expected).epsilon(1e-12));
    CHECK(f.backward + f.weight_grad == Approx(2 * f.forward).epsilon(1e-12));
    if (std::string(name) != "llama-3-8b" && std::string(name) != "llama-2-7b") {
      // For large models 6 * (all parameters) is within 3% of the linear part.
      CHECK(rel(6 * module_params(mod) * s, 6 * n_mm * s) < 0.03);
    }
  }
}

TEST_CASE("preset registries list every name and reject unknown ones") {
  for (const auto& n : presets::module_preset_names()) CHECK(presets::module_preset(n).name == n);
  for (const auto& n : presets::model_preset_names())
    CHECK_NOTHROW(presets::model_preset(n).validate());
  for (const auto& n : presets::data_preset_names())
    CHECK_NOTHROW(presets::data_preset(n).validate());
  for (const auto& n : presets::cluster_preset_names())
    CHECK(presets::cluster_preset(n, 16).num_gpus == 16);
  for (const auto& n : presets::scenario_preset_names()) {
    const auto sc = presets::scenario_preset(n);
    CHECK(sc.name == n);
    CHECK_NOTHROW(sc.validate());
  }
  DISTTRAIN_CHECK_ERROR(presets::module_preset("gpt-5"), errc::invalid_argument, "preset");
  DISTTRAIN_CHECK_ERROR(presets::scenario_preset("nope"), errc::invalid_argument, "preset");
  DISTTRAIN_CHECK_ERROR(presets::cluster_preset("tpu", 8), errc::invalid_argument, "preset");
}

TEST_CASE("paper-72b scenario is the paper's setting") {
  const auto sc = presets::scenario_preset("paper-72b");
  CHECK(sc.cluster.num_gpus == 1172);
  CHECK(sc.cluster.gpus_per_node == 8);
  CHECK(sc.cluster.inter_node_bandwidth_bytes_per_s == 50e9);  // 400 Gb/s per GPU
  CHECK(sc.cluster.intra_node_bandwidth_bytes_per_s ==
        200e9);  // H800 NVLink 400 GB/s bidirectional
  REQUIRE(sc.model.modules.size() == 3);
  CHECK(sc.model.modules[0].role == module_role::encoder);
  CHECK(sc.model.modules[1].name == "qwen2-72b");
  CHECK(sc.model.modules[2].name == "sd-2.1-unet");
  CHECK(sc.cluster.num_nodes() == 147);
}
