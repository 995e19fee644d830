// analytic_cost_model against hand computations and independent references.
#include <cmath>
#include <string>

#include "disttrain/cost.hpp"
#include "disttrain/cost/json.hpp"
#include "disttrain/model.hpp"
#include "disttrain/model/json.hpp"
#include "disttrain_catch.hpp"

using namespace disttrain;

namespace {
model_spec solo(module_spec m) { return model_spec{.name = "solo", .modules = {std::move(m)}}; }
module_workload one_sequence(double s) {
  module_workload w;
  w.add_sequence(s);
  return w;
}
}  // namespace

TEST_CASE("memory of a known configuration equals a hand computation") {
  // Llama-2-7B, layers 0..15 (holds the embedding), TP 2, DP 4, no recompute,
  // one 4096-token sequence per microbatch, 3 microbatches in flight.
  analytic_cost_model cm(solo(presets::llama2_7b()), presets::h800_cluster(64));
  const stage_config s{0, 0, 16, 2, 4, false};
  const auto m = cm.stage_memory(s, one_sequence(4096), 3);
  const double h = 4096, mlp = 11008;
  const double layer = 4 * h * h + 3 * h * mlp + 2 * h;  // 202,383,360
  const double params = (16 * layer + 32000 * h) / 2;    // per GPU
  CHECK(params == 1684602880.0);
  CHECK(m.params == 2 * params);
  CHECK(m.grads == 4 * params);  // fp32 gradient buffers (Megatron's bf16 default)
  CHECK(m.optimizer == 12 * params / 4);
  const double act_per_token = 2 * (6 * h + 2 * h + 3 * mlp);  // 131,584 bytes
  CHECK(m.activations == Approx(3 * 16 * act_per_token * 4096 / 2).epsilon(1e-12));
  CHECK(m.total() ==
        Approx(3369205760.0 + 6738411520.0 + 5053808640.0 + 12935233536.0).epsilon(1e-12));

  // Recompute keeps 2h bytes per token per layer plus one layer's full activations.
  const auto r = cm.stage_memory(stage_config{0, 0, 16, 2, 4, true}, one_sequence(4096), 3);
  CHECK(r.activations ==
        Approx(3 * 16 * 2 * h * 4096 / 2 + act_per_token * 4096 / 2).epsilon(1e-12));
  // The last stage also holds the logits (bf16 + fp32, 6 bytes per vocab entry).
  const auto last = cm.stage_memory(stage_config{0, 16, 16, 2, 4, false}, one_sequence(4096), 1);
  CHECK(last.activations ==
        Approx(16 * act_per_token * 4096 / 2 + 6.0 * 32000 * 4096 / 2).epsilon(1e-12));
  CHECK(last.params == Approx(2 * (16 * layer + 32000 * h + h) / 2).epsilon(1e-12));
}

TEST_CASE("an over-memory layout is infeasible, naming module, stage and bytes over") {
  analytic_cost_model cm(solo(presets::llama3_70b()), presets::h800_cluster(64));
  const stage_config s{0, 0, 80, 1, 1, false};  // whole 70B on one GPU
  try {
    (void)cm.check_stage_memory(s, one_sequence(4096), 1, 0);
    FAIL("no throw");
  } catch (const error& e) {
    CHECK(e.code() == errc::infeasible);
    CHECK(e.where() == "llama-3-70b/stage 0");
    const std::string msg = e.message();
    CHECK(msg.find("limit 76.00 GB") != std::string::npos);
    CHECK(msg.find("over by") != std::string::npos);
    const double total = cm.stage_memory(s, one_sequence(4096), 1).total();
    CHECK(msg.find(detail::gb(total - 76e9)) != std::string::npos);
  }
  // A feasible one passes and returns the breakdown.
  const stage_config ok{0, 0, 10, 8, 8, true};
  CHECK(cm.check_stage_memory(ok, one_sequence(4096), 8, 0).total() < cm.memory_limit());
  DISTTRAIN_CHECK_ERROR(require_fits(memory_breakdown{1, 1, 1, 1}, 3.5, "vit", 2), errc::infeasible,
                        "vit/stage 2");
}

TEST_CASE("stage time follows the efficiency curve and closed form equals the per-layer sum") {
  analytic_cost_model cm(solo(presets::llama3_8b()), presets::h100_cluster(8));
  const auto& e = cm.params().efficiency_for(module_role::backbone);
  const auto& sh = cm.shape(0);
  const auto w = one_sequence(2048);
  // Middle layers, TP 1: forward = n (f + f_half) / (peak e_max).
  const auto t = cm.stage_time(stage_config{0, 4, 8, 1, 1, false}, w);
  const double f = sh.layer.flops_per_token * 2048 + sh.layer.flops_per_token_sq * 2048.0 * 2048;
  CHECK(t.forward_s == Approx(8 * (f + e.flops_half) / (989.4e12 * e.e_max)).epsilon(1e-12));
  const double att = sh.layer.flops_per_token_sq * 2048.0 * 2048;
  CHECK(t.backward_s == Approx(8 * (f + att + e.flops_half) / (989.4e12 * e.e_max)).epsilon(1e-12));
  CHECK(t.weight_grad_s ==
        Approx(8 * (sh.layer.flops_per_token * 2048 + e.flops_half) / (989.4e12 * e.e_max))
            .epsilon(1e-12));

  // Closed form over 32 layers with pre/post == sum of 32 one-layer stages (TP 4: comm included).
  const auto whole = cm.stage_time(stage_config{0, 0, 32, 4, 1, false}, w);
  stage_times sum;
  for (int l = 0; l < 32; ++l) {
    const auto x = cm.stage_time(stage_config{0, l, 1, 4, 1, false}, w);
    sum.forward_s += x.forward_s;
    sum.backward_s += x.backward_s;
    sum.weight_grad_s += x.weight_grad_s;
  }
  CHECK(whole.forward_s == Approx(sum.forward_s).epsilon(1e-12));
  CHECK(whole.backward_s == Approx(sum.backward_s).epsilon(1e-12));
  CHECK(whole.weight_grad_s == Approx(sum.weight_grad_s).epsilon(1e-12));

  // TP comm: 2 ring all-reduces of 2 h T bytes per layer per pass over NVLink.
  const auto t4 = cm.stage_time(stage_config{0, 4, 8, 4, 1, false}, w);
  const double bw = 450e9 * 0.8, lat = 5e-6;
  const double ar = 2 * 3 * lat + 2 * 0.75 * (2 * 4096 * 2048) / bw;
  const double comp = (f / 4 * (1 + e.tp_penalty * 3) + e.flops_half) / (989.4e12 * e.e_max);
  CHECK(t4.forward_s == Approx(8 * (comp + 2 * ar)).epsilon(1e-12));
  CHECK(t4.forward_s < t.forward_s);

  // Recompute adds the layers' forward to the backward.
  const auto rc = cm.stage_time(stage_config{0, 4, 8, 4, 1, true}, w);
  CHECK(rc.backward_s == Approx(t4.backward_s + t4.forward_s).epsilon(1e-12));
  // Empty workload costs nothing.
  CHECK(cm.stage_time(stage_config{0, 0, 32, 1, 1, false}, module_workload{}).total_s() == 0);
}

TEST_CASE("frozen modules skip weight gradients, and backward where nothing upstream trains") {
  auto m = presets::mllm_7b();
  m.modules[0].frozen = true;  // encoder: frozen, nothing upstream -> no backward at all
  m.modules[2].frozen = true;  // generator: frozen but the backbone trains -> B only
  analytic_cost_model cm(m, presets::h800_cluster(64));
  module_workload w;
  w.add_sequence(1025);
  const stage_config enc{0, 0, 32, 1, 4, false};
  const auto te = cm.stage_time(enc, w);
  CHECK(te.forward_s > 0);
  CHECK(te.backward_s == 0);
  CHECK(te.weight_grad_s == 0);
  const auto me = cm.stage_memory(enc, w, 4);
  CHECK(me.grads == 0);
  CHECK(me.optimizer == 0);
  CHECK(cm.dp_sync_time(enc, true) == 0);
  CHECK(cm.optimizer_time(enc) == 0);
  const stage_config gen{2, 0, 25, 1, 4, false};
  module_workload g;
  g.add_sequence(4096);
  const auto tg = cm.stage_time(gen, g);
  CHECK(tg.backward_s > 0);
  CHECK(tg.weight_grad_s == 0);
  const auto fg = cm.flops(gen, g);
  CHECK(fg.weight_grad == 0);
  CHECK(fg.backward == Approx(fg.forward + 7300.0 * 4096 * 4096).epsilon(1e-12));  // L + 2A
}

TEST_CASE("DP sync, optimizer step, p2p and module transfers match alpha-beta hand computations") {
  const auto sc = presets::scenario_preset("mllm-7b");
  analytic_cost_model cm(sc.model, sc.cluster);
  const stage_config s{1, 0, 32, 2, 8, false};  // whole Llama-2-7B, TP 2, DP 8
  const double p = module_params(presets::llama2_7b()) / 2;
  const double inter_bw = 50e9 * 0.85, intra_bw = 200e9 * 0.8;
  // Reduce-scatter of fp32 gradients (4 bytes) + all-gather of bf16 parameters (2 bytes).
  auto ring = [&](double bytes, double alpha, double bw) {
    return 7 * alpha + 7.0 / 8 * bytes / bw;
  };
  const double inter = ring(4 * p, 10e-6, inter_bw) + ring(2 * p, 10e-6, inter_bw);
  CHECK(cm.dp_sync_time(s, true) == Approx(inter).epsilon(1e-12));
  const double intra = ring(4 * p, 5e-6, intra_bw) + ring(2 * p, 5e-6, intra_bw);
  CHECK(cm.dp_sync_time(s, false) == Approx(intra).epsilon(1e-12));
  CHECK(cm.dp_sync(s, false).reduce_scatter_s ==
        Approx(ring(4 * p, 5e-6, intra_bw)).epsilon(1e-12));
  CHECK(cm.dp_sync_time(stage_config{1, 0, 32, 2, 1, false}, true) == 0);
  // Adam: read+write 12 bytes of state, read a 4-byte gradient, write a 2-byte parameter.
  CHECK(cm.optimizer_time(s) == Approx(p / 8 * 30 / (3.35e12 * 0.8)).epsilon(1e-12));
  CHECK(cm.p2p_time(1e6, true) == Approx(5e-6 + 1e6 / intra_bw).epsilon(1e-12));
  CHECK(cm.p2p_time(1e6, false) == Approx(10e-6 + 1e6 / inter_bw).epsilon(1e-12));
  CHECK(cm.p2p_time(0, false) == 0);

  const sample x{
      .id = 0, .text_tokens = 100, .images = {{448, 448}, {448, 896}}, .generated = {{512, 512}}};
  const auto w = workload_of(sc.model, x);
  CHECK(cm.transfer_bytes(0, 1, w) == Approx((1025.0 + 513.0) / 4 * 2 * 4096).epsilon(1e-12));
  CHECK(cm.transfer_bytes(1, 2, w) == 64.0 * 2 * 4096);
  CHECK(cm.stage_output_bytes(s, w[1]) == 550.0 * 2 * 4096);
  DISTTRAIN_CHECK_ERROR(cm.transfer_bytes(0, 2, w), errc::invalid_argument, "transfer");
}

TEST_CASE("expected stage time equals the mean over sampled microbatches (affine model)") {
  const auto sc = presets::scenario_preset("mllm-13b");
  analytic_cost_model cm(sc.model, sc.cluster);
  data_sampler ds(sc.data);
  const int n = 200;
  const stage_config s{1, 0, 20, 4, 2, true};
  double mean = 0;
  model_workload acc;
  for (int i = 0; i < n; ++i) {
    const auto w = workload_of(sc.model, ds.draw(static_cast<std::uint64_t>(i)));
    acc += w;
    mean += cm.stage_time(s, w[1]).total_s() / n;
  }
  const auto expected = acc * (1.0 / n);
  CHECK(cm.stage_time(s, expected[1]).total_s() == Approx(mean).epsilon(1e-9));
}

TEST_CASE("bad stage queries name the field") {
  analytic_cost_model cm(presets::mllm_7b(), presets::h800_cluster(64));
  module_workload w = one_sequence(100);
  DISTTRAIN_CHECK_ERROR(cm.stage_time(stage_config{1, 0, 4, 16, 1, false}, w),
                        errc::invalid_argument, "llama-2-7b.tp");
  DISTTRAIN_CHECK_ERROR(cm.stage_time(stage_config{1, 0, 4, 3, 1, false}, w),
                        errc::invalid_argument, "llama-2-7b.tp");
  DISTTRAIN_CHECK_ERROR(cm.stage_time(stage_config{1, 0, 4, 0, 1, false}, w),
                        errc::invalid_argument, "tp");
  DISTTRAIN_CHECK_ERROR(cm.stage_time(stage_config{1, 30, 4, 1, 1, false}, w),
                        errc::invalid_argument, "llama-2-7b.layers");
  DISTTRAIN_CHECK_ERROR(cm.stage_time(stage_config{1, 0, 0, 1, 1, false}, w),
                        errc::invalid_argument, "layers");
  DISTTRAIN_CHECK_ERROR(cm.stage_memory(stage_config{1, 0, 4, 1, 0, false}, w, 1),
                        errc::invalid_argument, "llama-2-7b.dp");
  DISTTRAIN_CHECK_ERROR(cm.stage_memory(stage_config{1, 0, 4, 1, 1, false}, w, -1),
                        errc::invalid_argument, "in_flight");
  DISTTRAIN_CHECK_ERROR(cm.stage_time(stage_config{7, 0, 4, 1, 1, false}, w),
                        errc::invalid_argument, "stage.module");
  // InternViT-6B: 25 heads, so TP 2 does not split it.
  analytic_cost_model iv(
      model_spec{.name = "x", .modules = {presets::internvit_6b(), presets::llama2_7b()}},
      presets::h800_cluster(8));
  DISTTRAIN_CHECK_ERROR(iv.stage_time(stage_config{0, 0, 48, 2, 1, false}, w),
                        errc::invalid_argument, "internvit-6b.tp");
  CHECK_NOTHROW(iv.stage_time(stage_config{0, 0, 48, 1, 1, false}, w));
  auto bad = cost_params{};
  bad.efficiency_for(module_role::encoder).e_max = 1.5;
  DISTTRAIN_CHECK_ERROR(analytic_cost_model(presets::mllm_7b(), presets::h800_cluster(8), bad),
                        errc::invalid_argument, "cost.efficiency.encoder.e_max");
  auto bad_cluster = presets::h800_cluster(8);
  bad_cluster.intra_node_bandwidth_bytes_per_s = 0;
  DISTTRAIN_CHECK_ERROR(analytic_cost_model(presets::mllm_7b(), bad_cluster),
                        errc::invalid_argument, "cluster.intra_node_bandwidth_bytes_per_s");
}

TEST_CASE("cost parameters round-trip through JSON and read partial objects") {
  cost_params p;
  p.efficiency_for(module_role::generator) = efficiency_params{0.5, 1e9, 0.1};
  p.memory_reserve_bytes = 1e9;
  const json j = p;
  const auto back = j.get<cost_params>();
  CHECK(back.efficiency_for(module_role::generator) == p.efficiency_for(module_role::generator));
  CHECK(back.memory_reserve_bytes == 1e9);
  const auto partial = parse_json(R"({"efficiency": {"encoder": {"e_max": 0.6, "flops_half": 0}}})")
                           .get<cost_params>();
  CHECK(partial.efficiency_for(module_role::encoder).e_max == 0.6);
  CHECK(partial.efficiency_for(module_role::backbone) == efficiency_params{});
  DISTTRAIN_CHECK_ERROR(
      parse_json(R"({"efficiency": {"encoder": {"e_max": 0.6}}})").get<cost_params>(),
      errc::parse_error, "cost.efficiency.encoder.flops_half");
}

TEST_CASE("collective formulas") {
  const link_spec l{.bandwidth_bytes_per_s = 100e9, .latency_s = 1e-5};
  CHECK(all_reduce_time(1e9, 4, l) == Approx(2 * (3 * 1e-5 + 0.75 * 1e9 / 100e9)).epsilon(1e-12));
  CHECK(all_gather_time(1e9, 1, l) == 0);
  CHECK(reduce_scatter_time(8e9, 8, l) == Approx(7 * 1e-5 + 7.0 / 8 * 8e9 / 100e9).epsilon(1e-12));
  CHECK(efficiency(1e12, 1, efficiency_params{0.8, 0, 0}) == Approx(0.8));
  CHECK(efficiency(1e10, 1, efficiency_params{0.8, 1e10, 0}) == Approx(0.4));  // half at flops_half
}
