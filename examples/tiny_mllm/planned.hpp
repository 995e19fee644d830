#pragma once
/// @file planned.hpp
/// @brief The tiny model's layout from disttrain's planner (plan/): the model
/// described as a `model_spec` with the tiny modules' real shapes, its data as
/// recorded samples (the very samples the example trains on), a cluster of
/// the world's ranks seen as "GPUs" of one node, the planner run over that,
/// and its `parallel_plan` turned into the example's `dist_plan`.
///
/// ## What the tiny modules are, in the planner's vocabulary
/// - encoder: a one-layer ViT over `patch_dim` pixel-channels per patch,
///   width `enc_hidden`, MLP `enc_hidden`, one head, no class token, patch
///   side 1 at native resolution: an image of `p` patches is a 1 x p image
///   (`p` tokens). The projector makes one backbone token per image.
/// - backbone: a decoder LLM of `layers` layers, width `model_dim`, one head,
///   plain MLP of width `model_dim`, vocabulary `vocab`.
/// - generator: a one-block DiT of width `gen_hidden` over one latent token
///   per sample (the tiny generator predicts one latent per sample from the
///   pooled backbone output; no extra condition tokens).
///
/// ## The "cluster"
/// One rank stands for one GPU: a CPU core running small Eigen products. Its
/// figures are rough measurements of this class of machine, not a claim of
/// accuracy: ~2 GFLOP/s sustained on these tiny products, a fixed cost of
/// ~2 microseconds per op (`flops_half`), and MPI over shared memory at
/// ~2 GB/s with ~5 microseconds per message. All ranks form one node
/// (`gpus_per_node` = ranks), so every link is intra-node.
///
/// ## The search
/// The tiny trainer runs TP 1 and one stage per side module, each module on
/// its own ranks: the planner is asked for exactly that
/// (`tp_candidates = {1}`, `max_side_pp = 1`, `include_monolithic = false`,
/// `include_mixed = false`).
/// `to_dist_plan` still checks every such property and throws
/// `invalid_argument` naming the field if a plan breaks one (a plan from
/// JSON, or a future planner).
///
/// @code
/// auto pr = tiny_mllm::plan_layout(cfg, /*ranks=*/7, /*batch=*/12);
/// tiny_mllm::dist_plan plan = tiny_mllm::to_dist_plan(pr.plan, cfg);
/// @endcode

#include <cstdint>
#include <vector>

#include "disttrain/cost/analytic_cost_model.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/plan/parallel_plan.hpp"
#include "disttrain/plan/planner.hpp"
#include "disttrain/plan/request.hpp"

#include "data.hpp"
#include "dist_trainer.hpp"

namespace tiny_mllm {

/// @brief The tiny model as a `model_spec` (see the file comment).
inline disttrain::model_spec model_spec_of(const config& c) {
  disttrain::vit_encoder_arch enc{.image_size = c.max_patches,
                                  .patch_size = 1,
                                  .layers = 1,
                                  .hidden = c.enc_hidden,
                                  .heads = 1,
                                  .mlp = c.enc_hidden,
                                  .channels = c.patch_dim,
                                  .class_token = false,
                                  .qkv_bias = true,
                                  .max_image_size = c.max_patches};
  disttrain::decoder_llm_arch bb{.layers = c.layers,
                                 .hidden = c.model_dim,
                                 .heads = 1,
                                 .kv_heads = 1,
                                 .mlp = c.model_dim,
                                 .vocab = c.vocab,
                                 .max_seq = c.max_images + c.max_text,
                                 .gated_mlp = false,
                                 .qkv_bias = false,
                                 .tied_embeddings = false};
  disttrain::diffusion_arch gen{.kind = disttrain::diffusion_kind::dit,
                                .resolution = 1,
                                .latent_downsample = 1,
                                .latent_channels = c.latent_dim,
                                .patch_size = 1,
                                .layers = 1,
                                .hidden = c.gen_hidden,
                                .heads = 1,
                                .mlp = c.gen_hidden,
                                .learn_sigma = false};
  return {.name = "tiny_mllm",
          .modules = {{"encoder", disttrain::module_role::encoder, enc, false, false},
                      {"backbone", disttrain::module_role::backbone, bb, false, false},
                      {"generator", disttrain::module_role::generator, gen, false, false}},
          .connections = {},
          .projector_tokens_per_image = 1,
          .projector_patch_ratio = 1,
          .generator_condition_tokens = 0};
}

/// @brief The example's samples `0 .. count-1` as recorded planner samples:
/// text tokens, one 1 x p image per image of p patches, one 1 x 1 generated
/// image (the latent).
inline disttrain::data_spec data_spec_of(const config& c, std::uint64_t count) {
  disttrain::data_spec d;
  d.name = "tiny_mllm synthetic";
  for (std::uint64_t id = 0; id < count; ++id) {
    const sample_meta m = make_meta(c, id);
    disttrain::sample s;
    s.id = id;
    s.text_tokens = m.text_len;
    for (int p : m.patches) s.images.push_back({1, p});
    s.generated.push_back({1, 1});
    d.records.push_back(std::move(s));
  }
  return d;
}

/// @brief `ranks` CPU ranks as one node of "GPUs" (figures in the file comment).
inline disttrain::cluster_spec cluster_of(int ranks, double rank_memory_bytes) {
  disttrain::require_positive(ranks, "tiny_mllm.ranks");
  disttrain::require_positive(rank_memory_bytes, "tiny_mllm.rank_memory");
  return {.name = "cpu ranks",
          .gpu = {.name = "cpu core",
                  .peak_bf16_tflops = 2e-3,
                  .peak_fp32_tflops = 2e-3,
                  .hbm_bytes = rank_memory_bytes,
                  .hbm_bandwidth_bytes_per_s = 5e9},
          .num_gpus = ranks,
          .gpus_per_node = ranks,
          .intra_node_bandwidth_bytes_per_s = 2e9,
          .intra_node_latency_s = 5e-6,
          .inter_node_bandwidth_bytes_per_s = 2e9,
          .inter_node_latency_s = 5e-6};
}

/// @brief Cost parameters of a CPU rank: ~2 microseconds of fixed cost per op
/// (4e3 FLOPs at 2 GFLOP/s), full efficiency otherwise, no memory reserve.
inline disttrain::cost_params cost_params_of() {
  disttrain::cost_params p;
  for (auto& e : p.efficiency) e = {.e_max = 1.0, .flops_half = 4e3, .tp_penalty = 0.0};
  p.memory_reserve_bytes = 0;
  return p;
}

/// @brief The planner's search restricted to what the tiny trainer runs:
/// TP 1, one stage per side module, every module on its own ranks.
inline disttrain::planner_options planner_options_of(int min_backbone_pp = 1) {
  disttrain::planner_options o;
  o.min_backbone_pp = min_backbone_pp;
  o.tp_candidates = {1};
  o.max_side_pp = 1;
  o.include_monolithic = false;
  o.include_mixed = false;
  o.search_recompute = false;
  return o;
}

/// @brief Plans the tiny model (`c`) on `ranks` ranks of `rank_memory_bytes`
/// each for global batches of `batch` samples, with at least
/// `min_backbone_pp` backbone stages. The expected sample is the mean over the
/// first 64 batches the example can train on. Throws `infeasible` when
/// nothing fits, `invalid_argument` for bad sizes.
inline disttrain::plan_result plan_layout(const config& c, int ranks, int batch,
                                          double rank_memory_bytes = 1e9, int min_backbone_pp = 1) {
  disttrain::require_positive(batch, "tiny_mllm.batch");
  const auto model = model_spec_of(c);
  disttrain::analytic_cost_model cost(model, cluster_of(ranks, rank_memory_bytes),
                                      cost_params_of());
  const auto data = data_spec_of(c, 64 * static_cast<std::uint64_t>(batch));
  const auto req = disttrain::make_request(model, data, batch, data.records.size());
  return disttrain::plan_parallelism(cost, req, planner_options_of(min_backbone_pp));
}

/// @brief The example's plan from a planner plan of the tiny model: module
/// DPs, backbone stages and their layers, microbatches, batch. Throws
/// `invalid_argument` naming `plan.<module>.<field>` for what the tiny trainer
/// cannot run: a missing module, a colocated module, TP > 1, a side module
/// with PP > 1, backbone layers not summing to `c.layers`, a GPipe schedule is
/// fine (the trainer's program is its own).
inline dist_plan to_dist_plan(const disttrain::parallel_plan& p, const config& c,
                              dist_plan base = {}) {
  disttrain::validate(p);
  using disttrain::require;
  require(p.modules.size() == 3, "plan.modules",
          "the tiny trainer needs an encoder, a backbone and a generator, got ", p.modules.size(),
          " modules");
  static constexpr const char* roles[3] = {"encoder", "backbone", "generator"};
  for (std::size_t i = 0; i < 3; ++i) {
    const auto& m = p.modules[i];
    const std::string w = "plan." + m.name;
    require(m.role == roles[i], w + ".role", "expected the ", roles[i], " at position ", i,
            ", got ", m.role);
    require(!m.colocated, w + ".colocated", "the tiny trainer runs every module on its own ranks");
    require(m.tp == 1, w + ".tp", "the tiny trainer has no tensor parallelism (tp 1), got ", m.tp);
    require(m.role == "backbone" || m.pp == 1, w + ".pp",
            "the tiny trainer runs side modules in one stage, got ", m.pp);
  }
  const auto& bb = p.modules[1];
  int layers = 0;
  for (int l : bb.layers) layers += l;
  require(layers == c.layers, "plan." + bb.name + ".layers", "sum to ", layers,
          ", the tiny backbone has ", c.layers);
  base.enc_dp = p.modules[0].dp;
  base.bb_pp = bb.pp;
  base.bb_dp = bb.dp;
  base.bb_layers = bb.layers;
  base.gen_dp = p.modules[2].dp;
  base.microbatches = p.num_microbatches;
  base.batch_size = p.global_batch;
  return base;
}

}  // namespace tiny_mllm
