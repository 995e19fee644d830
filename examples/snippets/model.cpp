// The examples of the model part (disttrain/model/*.hpp): see snippets.hpp.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "disttrain/model.hpp"
#include "disttrain/model/format.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain/model/sample_csv.hpp"
#include "snippets.hpp"

namespace {

using snippets::check;

void vit_encoder_arch() {
  //! [vit_encoder_arch]
  disttrain::vit_encoder_arch a{
      .image_size = 224, .patch_size = 14, .layers = 32, .hidden = 1280, .heads = 16, .mlp = 5120};
  a.validate("encoder");
  //! [vit_encoder_arch]
  check(disttrain::encoder_tokens(a, {224, 224}) == 257, "vit tokens");
}

void decoder_llm_arch() {
  //! [decoder_llm_arch]
  disttrain::decoder_llm_arch a{.layers = 32,
                                .hidden = 4096,
                                .heads = 32,
                                .kv_heads = 8,
                                .mlp = 14336,
                                .vocab = 128256,
                                .max_seq = 8192};
  //! [decoder_llm_arch]
  a.validate("backbone");
}

void diffusion_arch() {
  //! [diffusion_arch]
  auto dit = disttrain::diffusion_arch{.kind = disttrain::diffusion_kind::dit,
                                       .resolution = 256,
                                       .layers = 28,
                                       .hidden = 1152,
                                       .heads = 16,
                                       .mlp = 4608};
  //! [diffusion_arch]
  dit.validate("generator");
}

void gpu_spec() {
  //! [gpu_spec]
  disttrain::gpu_spec g{.name = "H800",
                        .peak_bf16_tflops = 989,
                        .peak_fp32_tflops = 67,
                        .hbm_bytes = 80e9,
                        .hbm_bandwidth_bytes_per_s = 3.35e12};
  double peak = g.peak_bf16_flops();  // 9.89e14
  //! [gpu_spec]
  check(peak == 9.89e14, "peak_bf16_flops");
}

void cluster_spec() {
  //! [cluster_spec]
  auto c = disttrain::presets::h800_cluster(1172);
  int nodes = c.num_nodes();  // 147 (the last one holds 4 GPUs)
  //! [cluster_spec]
  check(nodes == 147 && c.num_gpus - 146 * c.gpus_per_node == 4, "num_nodes");
}

void data_sampler() {
  //! [data_sampler]
  auto d = disttrain::presets::laion400m_like();
  disttrain::data_sampler s(d);
  disttrain::sample x = s.draw(12345);  // the same on every rank
  auto batch = s.draw_batch(0, 1024);   // ids 0..1023
  //! [data_sampler]
  check(x == disttrain::data_sampler(d).draw(12345), "draw is deterministic");
  check(batch.size() == 1024 && batch.front().id == 0 && batch.back().id == 1023, "draw_batch");
}

void read_sample_csv() {
  //! [read_sample_csv]
  std::istringstream csv(
      "text_tokens,images,image_tokens,generated_images\n"
      "812,2,1024,0\n"
      "95,1,576,1\n");
  std::vector<disttrain::sample> rows = disttrain::read_sample_csv(csv, "my_data.csv");
  disttrain::data_spec mine;
  mine.records = rows;  // the planner samples batches from them (cycled by id)
  //! [read_sample_csv]
  check(rows.size() == 2 && rows[0].images.size() == 2 && rows[0].images[0].width == 32 * 14,
        "read_sample_csv");
  check(disttrain::data_sampler(mine).draw(3).text_tokens == 95, "records cycle by id");
}

void constant_dist() {
  //! [constant_dist]
  disttrain::distribution d = disttrain::constant_dist{77};
  //! [constant_dist]
  check(d.mean() == 77, "constant_dist mean");
}

void uniform_int_dist() {
  //! [uniform_int_dist]
  disttrain::distribution d = disttrain::uniform_int_dist{1, 8};
  //! [uniform_int_dist]
  check(d.mean() == 4.5, "uniform_int_dist mean");
}

void lognormal_dist() {
  //! [lognormal_dist]
  disttrain::distribution d =
      disttrain::lognormal_dist{.median = 512, .sigma = 0.6, .min = 64, .max = 4096};
  //! [lognormal_dist]
  d.validate("lognormal");
  disttrain::splitmix64 rng(1);
  const double x = d.draw(rng);
  check(x >= 64 && x <= 4096, "lognormal_dist clamps");
}

void histogram_dist() {
  //! [histogram_dist]
  disttrain::distribution d = disttrain::histogram_dist{{224, 448, 896}, {0.5, 0.3, 0.2}};
  //! [histogram_dist]
  check(std::abs(d.mean() - (0.5 * 224 + 0.3 * 448 + 0.2 * 896)) < 1e-9, "histogram_dist mean");
}

void distribution() {
  //! [distribution]
  disttrain::distribution d = disttrain::lognormal_dist{300, 0.8, 8, 4096};
  d.validate("data.text_tokens");
  disttrain::splitmix64 rng(7);
  double x = d.draw(rng);
  //! [distribution]
  check(x >= 8 && x <= 4096, "distribution draw in [min, max]");
}

void format() {
  //! [format]
  fmt::print("{}", disttrain::format_model(disttrain::presets::paper_72b()));
  // model paper-72b: 3 modules
  //    #  name           role       arch   layers  hidden    params  flags
  //    0  vit-h-14       encoder    vit        32    1280     0.63B
  //    1  qwen2-72b      backbone   llm        80    8192    72.71B
  //    2  sd-2.1-unet    generator  unet       25     320     0.87B
  fmt::print("{}\n", disttrain::module_role::backbone);  // backbone
  //! [format]
  // The table above, each line without its trailing blanks.
  std::string table = disttrain::format_model(disttrain::presets::paper_72b()), trimmed;
  for (std::size_t at = 0; at < table.size();) {
    std::size_t end = table.find('\n', at);
    if (end == std::string::npos) end = table.size();
    std::string line = table.substr(at, end - at);
    line.erase(line.find_last_not_of(' ') + 1);
    trimmed += line + "\n";
    at = end + 1;
  }
  check(trimmed ==
            "model paper-72b: 3 modules\n"
            "   #  name           role       arch   layers  hidden    params  flags\n"
            "   0  vit-h-14       encoder    vit        32    1280     0.63B\n"
            "   1  qwen2-72b      backbone   llm        80    8192    72.71B\n"
            "   2  sd-2.1-unet    generator  unet       25     320     0.87B\n",
        "format_model: the table shown");
  check(fmt::format("{}", disttrain::module_role::backbone) == "backbone", "format module_role");
}

void model_spec() {
  const disttrain::module_spec enc = disttrain::presets::vit_h_14();
  const disttrain::module_spec llm = disttrain::presets::llama3_8b();
  const disttrain::module_spec gen = disttrain::presets::dit_xl_2();
  //! [model_spec]
  disttrain::model_spec m{.name = "tiny", .modules = {enc, llm, gen}};
  m.validate("model");
  bool b = m.input_grad_required(1);  // does the backbone need input gradients?
  //! [model_spec]
  check(b, "the backbone needs input gradients (the encoder is trainable)");
}

void module_shape() {
  //! [module_shape]
  auto s = disttrain::shape_of(disttrain::presets::llama3_70b());
  double n = s.total_params();  // ~70.55e9
  //! [module_shape]
  check(std::abs(n - 70.55e9) < 0.01e9, "llama3-70b parameters");
}

void encoder_tokens() {
  //! [encoder_tokens]
  int t = disttrain::encoder_tokens(disttrain::vit_encoder_arch{}, {224, 224});  // 257
  //! [encoder_tokens]
  check(t == 257, "encoder_tokens");
}

void module_spec() {
  //! [module_spec]
  disttrain::module_spec enc{.name = "vit",
                             .role = disttrain::module_role::encoder,
                             .arch = disttrain::vit_encoder_arch{},
                             .frozen = true};
  enc.validate("model.modules[0]");
  //! [module_spec]
  check(enc.layers() == 32, "module_spec layers");
}

void presets() {
  //! [presets]
  auto llm = disttrain::presets::llama3_70b();
  auto sc = disttrain::presets::scenario_preset("paper-72b");
  for (auto n : disttrain::presets::scenario_preset_names()) { /* ... */
  }
  //! [presets]
  check(llm.name == "llama-3-70b" && sc.name == "paper-72b", "presets");
  for (const auto& n : disttrain::presets::scenario_preset_names())
    check(disttrain::presets::scenario_preset(n).name == n, "scenario_preset(name).name");
}

void splitmix64() {
  //! [splitmix64]
  disttrain::splitmix64 rng(42);
  std::uint64_t x = rng.next();
  double u = rng.uniform01();       // in [0, 1)
  std::uint64_t k = rng.below(10);  // in [0, 10)
  //! [splitmix64]
  check(x == disttrain::splitmix64(42).next(), "next is deterministic");
  check(u >= 0 && u < 1 && k < 10, "uniform01 and below ranges");
}

void image_size() {
  //! [image_size]
  disttrain::image_size s{.height = 480, .width = 640};
  //! [image_size]
  check(s.height == 480 && s.width == 640, "image_size");
}

void sample() {
  //! [sample]
  disttrain::sample s{
      .id = 7, .text_tokens = 120, .images = {{448, 448}}, .generated = {{512, 512}}};
  //! [sample]
  s.validate("sample");
  check(s.images.size() == 1 && s.generated[0].width == 512, "sample");
}

void scenario() {
  //! [scenario]
  auto sc = disttrain::presets::scenario_preset("paper-72b");
  sc.validate();
  disttrain::json j = sc;  // round-trips through from_json
  //! [scenario]
  check(j.get<disttrain::scenario>().global_batch_size == sc.global_batch_size, "scenario JSON");
}

void module_workload() {
  //! [module_workload]
  disttrain::module_workload w{.sequences = 2, .tokens = 600, .tokens_sq = 180000};
  w += w;  // tokens == 1200
  //! [module_workload]
  check(w.tokens == 1200, "module_workload +=");
}

void workload_of() {
  const auto model = disttrain::presets::paper_72b();
  const disttrain::sample s{.id = 0, .text_tokens = 100, .images = {{224, 224}}, .generated = {}};
  //! [workload_of]
  auto w = disttrain::workload_of(model, s);
  double enc_tokens = w[0].tokens;
  //! [workload_of]
  check(enc_tokens == 257, "workload_of: the encoder's tokens");
}

void expected_workload() {
  const auto model = disttrain::presets::paper_72b();
  const auto data = disttrain::presets::laion400m_like();
  //! [expected_workload]
  auto e = disttrain::expected_workload(model, data);
  auto mb = e * 8.0;
  //! [expected_workload]
  check(std::abs(mb[1].tokens - 8 * e[1].tokens) < 1e-6 && e[1].tokens > 0, "expected_workload");
}

}  // namespace

int main() {
  snippets::runner r("model");
  r.run("read_sample_csv", read_sample_csv);
  r.run("vit_encoder_arch", vit_encoder_arch);
  r.run("decoder_llm_arch", decoder_llm_arch);
  r.run("diffusion_arch", diffusion_arch);
  r.run("gpu_spec", gpu_spec);
  r.run("cluster_spec", cluster_spec);
  r.run("data_sampler", data_sampler);
  r.run("constant_dist", constant_dist);
  r.run("uniform_int_dist", uniform_int_dist);
  r.run("lognormal_dist", lognormal_dist);
  r.run("histogram_dist", histogram_dist);
  r.run("distribution", distribution);
  r.run("format", format);
  r.run("model_spec", model_spec);
  r.run("module_shape", module_shape);
  r.run("encoder_tokens", encoder_tokens);
  r.run("module_spec", module_spec);
  r.run("presets", presets);
  r.run("splitmix64", splitmix64);
  r.run("image_size", image_size);
  r.run("sample", sample);
  r.run("scenario", scenario);
  r.run("module_workload", module_workload);
  r.run("workload_of", workload_of);
  r.run("expected_workload", expected_workload);
  return r.finish();
}
