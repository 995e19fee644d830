// Input hardening of the JSON readers (issue 12, item 8): integer fields reject
// fractions and out-of-range values, unknown keys are errors with a "did you
// mean" hint, an empty workload and an impossible memory reserve are located
// errors.
#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "disttrain/cost/cost_params.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {

// Runs `f`, requires a disttrain::error with `code`, `where() == where` and a
// message containing `message_part`.
template <class F>
void check_error(F&& f, errc code, const std::string& where, const std::string& message_part) {
  bool thrown = false;
  try {
    f();
  } catch (const disttrain::error& e) {
    thrown = true;
    INFO("what(): " << e.what());
    CHECK(e.code() == code);
    CHECK(e.where() == where);
    CHECK(e.message().find(message_part) != std::string::npos);
  }
  INFO("expected an error at " << where);
  CHECK(thrown);
}

json mllm7b() { return presets::scenario_preset("mllm-7b"); }

}  // namespace

TEST_CASE("integer fields reject fractions and out-of-range numbers") {
  auto read = [](const json& j) { return j.get<scenario>(); };
  auto j = mllm7b();
  j["cluster"]["num_gpus"] = 2.7;
  check_error([&] { (void)read(j); }, errc::parse_error, "cluster.num_gpus",
              "must be an integer, got 2.7");
  j = mllm7b();
  j["cluster"]["num_gpus"] = std::uint64_t{4294967360};  // 2^32 + 64 would wrap to 64
  check_error([&] { (void)read(j); }, errc::parse_error, "cluster.num_gpus", "out of range");
  j = mllm7b();
  j["global_batch_size"] = 256.5;
  check_error([&] { (void)read(j); }, errc::parse_error, "global_batch_size", "must be an integer");
  j = mllm7b();
  j["model"]["modules"][1]["arch"]["layers"] = std::int64_t{-4294967264};  // wraps to 32
  check_error([&] { (void)read(j); }, errc::parse_error, "model.modules[1].arch.layers",
              "out of range");
  j = mllm7b();
  j["data"]["seed"] = -1;  // std::uint64_t
  check_error([&] { (void)read(j); }, errc::parse_error, "data.seed", "out of range");
  j = mllm7b();
  j["data"]["images_per_sample"] = json{{"kind", "uniform_int"}, {"min", 0.5}, {"max", 3}};
  check_error([&] { (void)read(j); }, errc::parse_error, "data.images_per_sample.min",
              "must be an integer");
  j = mllm7b();
  j["data"]["records"] = json::array({json{{"text_tokens", 1e10}}});
  check_error([&] { (void)read(j); }, errc::parse_error, "data.records[0].text_tokens",
              "out of range");

  // Integral floats are integers; non-numbers keep the "wrong type" error.
  j = mllm7b();
  j["cluster"]["num_gpus"] = 64.0;
  CHECK(read(j).cluster.num_gpus == 64);
  const json k = parse_json(R"({"n": 1e3, "v": [1, 2.5], "s": "8", "b": 9e18, "u": 1.8e19})");
  CHECK(disttrain::json_get<int>(k, "n", "x") == 1000);
  check_error([&] { (void)disttrain::json_get<std::vector<int>>(k, "v", "x"); }, errc::parse_error,
              "x.v[1]", "must be an integer");
  check_error([&] { (void)disttrain::json_get<int>(k, "s", "x"); }, errc::parse_error, "x.s",
              "wrong type (string)");
  CHECK(disttrain::json_get<std::int64_t>(k, "b") == std::int64_t{9000000000000000000});
  check_error([&] { (void)disttrain::json_get<std::int64_t>(k, "u"); }, errc::parse_error, "u",
              "out of range");
  CHECK(disttrain::json_get<std::uint64_t>(k, "u") == std::uint64_t{18000000000000000000U});
  // Nested arrays are checked at every depth (a fuzz finding: 1.5e87 in a
  // sample placement was a float-to-int conversion, undefined behaviour).
  const json n = parse_json(R"({"r": [[0, 2], [1.5e87, 3]], "ok": [[1], [], [2, 3e0]]})");
  check_error([&] { (void)disttrain::json_get<std::vector<std::vector<int>>>(n, "r", "p"); },
              errc::parse_error, "p.r[1][0]", "out of range");
  CHECK(disttrain::json_get<std::vector<std::vector<int>>>(n, "ok") ==
        std::vector<std::vector<int>>{{1}, {}, {2, 3}});
  check_error([&] { (void)parse_json(R"([4294967744, 448])").get<image_size>(); },
              errc::parse_error, "image_size[0]", "out of range");
  check_error(
      [&] {
        (void)detail::read_sample(parse_json(R"({"text_tokens": 4, "images": [[8, 2.5]]})"), "s");
      },
      errc::parse_error, "s.images[0][1]", "must be an integer");
}

TEST_CASE("unknown keys are errors naming the path, with a did-you-mean hint") {
  auto read = [](const json& j) { return j.get<scenario>(); };
  struct typo {
    std::vector<std::string> object;  // path of the object inside the scenario
    std::string key;                  // the misspelt key
    std::string where;
    std::string hint;
  };
  const std::vector<typo> typos = {
      {{}, "global_batch", "global_batch", "known keys: name, description"},
      {{"cluster"}, "num_gpu", "cluster.num_gpu", "did you mean 'num_gpus'?"},
      {{"cluster", "gpu"}, "hbm_byte", "cluster.gpu.hbm_byte", "did you mean 'hbm_bytes'?"},
      {{"model"}, "conections", "model.conections", "did you mean 'connections'?"},
      {{"model", "modules", "0"},
       "recompue",
       "model.modules[0].recompue",
       "did you mean 'recompute'?"},
      {{"model", "modules", "0", "arch"},
       "patchsize",
       "model.modules[0].arch.patchsize",
       "did you mean 'patch_size'?"},
      {{"model", "modules", "1", "arch"},
       "kv_head",
       "model.modules[1].arch.kv_head",
       "did you mean 'kv_heads'?"},
      {{"model", "modules", "2", "arch"},
       "learn_sgima",
       "model.modules[2].arch.learn_sgima",
       "did you mean 'learn_sigma'?"},
      {{"data"}, "text_token", "data.text_token", "did you mean 'text_tokens'?"},
      {{"data", "text_tokens"}, "sigm", "data.text_tokens.sigm", "did you mean 'sigma'?"},
  };
  for (const auto& t : typos) {
    auto j = mllm7b();
    json* o = &j;
    for (const auto& p : t.object)
      o = (p.size() == 1 && p[0] >= '0' && p[0] <= '9')
              ? &(*o)[static_cast<std::size_t>(p[0] - '0')]
              : &(*o)[p];
    (*o)[t.key] = 1;
    check_error([&] { (void)read(j); }, errc::parse_error, t.where, "unknown key '" + t.key + "'");
    check_error([&] { (void)read(j); }, errc::parse_error, t.where, t.hint);
  }

  // A planner section is the tool's, not the scenario's.
  auto j = mllm7b();
  j["planner"] = json::object();
  check_error([&] { (void)read(j); }, errc::parse_error, "planner", "unknown key 'planner'");
  // A DiT reads no U-Net cost fields, so giving one is an error.
  json dit = presets::module_preset("dit-xl-2");
  dit["arch"]["params"] = 1e9;
  check_error([&] { (void)dit.get<module_spec>(); }, errc::parse_error, "arch.params",
              "unknown key 'params'");
  // Records and cost parameters.
  j = mllm7b();
  j["data"] = json{{"records", json::array({json{{"text_tokens", 5}, {"image", json::array()}}})}};
  check_error([&] { (void)read(j); }, errc::parse_error, "data.records[0].image",
              "did you mean 'images'?");
  // Records make the distributions unused, but a broken one is still an error.
  j["data"] = json{{"records", json::array({json{{"text_tokens", 5}}})},
                   {"text_tokens", json{{"kind", "normal"}}}};
  check_error([&] { (void)read(j); }, errc::parse_error, "data.text_tokens.kind",
              "unknown distribution kind 'normal'");
  check_error([&] { (void)parse_json(R"({"memory_reserve_byte": 1e9})").get<cost_params>(); },
              errc::parse_error, "cost.memory_reserve_byte",
              "did you mean 'memory_reserve_bytes'?");
  check_error([&] { (void)parse_json(R"({"efficiency": {"encodr": {}}})").get<cost_params>(); },
              errc::parse_error, "cost.efficiency.encodr", "did you mean 'encoder'?");
  check_error(
      [&] {
        (void)parse_json(
            R"({"efficiency": {"encoder": {"e_max": 0.5, "flops_half": 1, "emax": 1}}})")
            .get<cost_params>();
      },
      errc::parse_error, "cost.efficiency.encoder.emax", "did you mean 'e_max'?");

  // The helper on its own: a far-off key lists the known ones.
  const json k = parse_json(R"({"alpha": 1, "zzzzzz": 2})");
  check_error(
      [&] {
        disttrain::check_keys(k, {"alpha", "beta"}, "cfg");
      },
      errc::parse_error, "cfg.zzzzzz", "unknown key 'zzzzzz' (known keys: alpha, beta)");
  CHECK_NOTHROW(disttrain::check_keys(k, {"alpha", "zzzzzz"}, "cfg"));
}

TEST_CASE("everything disttrain writes reads back under the key checks") {
  for (const auto& name : presets::scenario_preset_names()) {
    const json j = presets::scenario_preset(name);
    CHECK_NOTHROW(j.get<scenario>());
  }
  for (const auto& name : presets::module_preset_names()) {
    const json j = presets::module_preset(name);
    CHECK_NOTHROW(j.get<module_spec>());
  }
  const json c = cost_params{};
  CHECK_NOTHROW(c.get<cost_params>());
  data_spec d;
  d.records = {sample{.id = 0, .text_tokens = 5, .images = {{10, 20}}, .generated = {{8, 8}}}};
  const json dj = d;
  CHECK_NOTHROW(dj.get<data_spec>());
}

TEST_CASE("an empty workload is a located error") {
  auto read = [](const json& j) { return j.get<scenario>(); };
  auto with_text = [](const json& text) {
    auto j = mllm7b();
    j["data"]["text_tokens"] = text;
    return j;
  };
  check_error([&] { (void)read(with_text(0)); }, errc::invalid_argument, "data.text_tokens",
              "the workload is empty");
  check_error(
      [&] {
        (void)read(with_text(json{{"kind", "constant"}, {"value", 0.2}}));
      },
      errc::invalid_argument, "data.text_tokens", "the workload is empty");
  check_error([&] { (void)read(with_text(-100)); }, errc::invalid_argument, "data.text_tokens",
              "must be >= 0");
  check_error(
      [&] {
        (void)read(with_text(json{{"kind", "uniform_int"}, {"min", -5}, {"max", 0}}));
      },
      errc::invalid_argument, "data.text_tokens", "must be >= 0");
  check_error(
      [&] {
        (void)read(with_text(json{{"kind", "histogram"}, {"values", {0, 7}}, {"weights", {1, 0}}}));
      },
      errc::invalid_argument, "data.text_tokens", "the workload is empty");
  auto j = mllm7b();
  j["data"]["images_per_sample"] = -1;
  check_error([&] { (void)read(j); }, errc::invalid_argument, "data.images_per_sample",
              "must be >= 0");
  j = mllm7b();
  j["data"] = json{{"records", json::array({json{{"text_tokens", 0}}, json{{"text_tokens", 0}}})}};
  check_error([&] { (void)read(j); }, errc::invalid_argument, "data.records",
              "the workload is empty");

  // Still fine: some samples without text, log-normals clamped at 0.
  CHECK_NOTHROW(read(with_text(json{{"kind", "uniform_int"}, {"min", 0}, {"max", 2}})));
  CHECK_NOTHROW(read(with_text(json{{"kind", "lognormal"}, {"median", 30}, {"sigma", 1}})));
  const distribution h = histogram_dist{{3, 9, 1}, {1, 1, 0}};
  CHECK(h.lowest() == 3);
  CHECK(h.highest() == 9);
}

TEST_CASE("a memory reserve must leave room on the GPU") {
  const gpu_spec gpu = presets::h800_sxm();
  cost_params p;
  CHECK_NOTHROW(p.validate_for(gpu));
  p.memory_reserve_bytes = gpu.hbm_bytes;
  check_error([&] { p.validate_for(gpu); }, errc::invalid_argument, "cost.memory_reserve_bytes",
              "bytes of HBM");
  p.memory_reserve_bytes = 2 * gpu.hbm_bytes;
  check_error([&] { p.validate_for(gpu, "c"); }, errc::invalid_argument, "c.memory_reserve_bytes",
              "must be less");
}

TEST_CASE("diffusion generators round-trip through their descriptors") {
  for (const char* name : {"sd-2.1-unet", "dit-xl-2"}) {
    const module_spec m = presets::module_preset(name);
    const auto& a = std::get<diffusion_arch>(m.arch);
    const json j = a;
    INFO(j.dump());
    CHECK(j.at("type") == "diffusion");
    CHECK(j.at("kind") == std::string(to_string(a.kind)));
    // The U-Net's cost totals are written for kind "unet" only.
    CHECK(j.contains("params") == (a.kind == diffusion_kind::unet));
    const auto b = j.get<diffusion_arch>();
    CHECK(json(b) == j);
    CHECK(b.resolution == a.resolution);
    CHECK(b.params == a.params);
    CHECK(b.forward_flops_per_token == a.forward_flops_per_token);
  }
  // A U-Net's patch size defaults to 1 (a DiT's to 2).
  json unet = json(presets::module_preset("sd-2.1-unet"))["arch"];
  unet.erase("patch_size");
  CHECK(unet.get<diffusion_arch>().patch_size == 1);
  json dit = json(presets::module_preset("dit-xl-2"))["arch"];
  dit.erase("patch_size");
  CHECK(dit.get<diffusion_arch>().patch_size == 2);
  // The kind is read by name; an unknown one is a located error.
  dit["kind"] = "gan";
  check_error([&] { (void)dit.get<diffusion_arch>(); }, errc::parse_error, "kind",
              "unknown value \"gan\" (valid: \"unet\", \"dit\")");
  dit.erase("kind");
  check_error([&] { (void)dit.get<diffusion_arch>(); }, errc::parse_error, "kind", "missing");
}
