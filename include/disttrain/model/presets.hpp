#pragma once
/// @file presets.hpp
/// @brief Named, documented presets: published architectures, GPU clusters,
/// data distributions, combined models and planning scenarios.
///
/// Each function documents its source. Name lookups (`module_preset("llama-3-70b")`,
/// `scenario_preset("paper-72b")`, ...) throw `invalid_argument` at "preset" listing
/// the known names when a name is unknown.
///
/// @snippet model.cpp presets

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/model/architecture.hpp"
#include "disttrain/model/cluster_spec.hpp"
#include "disttrain/model/data_spec.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/module_spec.hpp"
#include "disttrain/model/scenario.hpp"

namespace disttrain::presets {

// ---- Encoders ---------------------------------------------------------------

/// @brief ViT-H/14 (CLIP / OpenCLIP ViT-H-14 vision tower, Dosovitskiy et al. 2021,
/// Table 1): 32 layers, width 1280, 16 heads, MLP 5120, patch 14, 224 px.
/// ~0.63B parameters; 167 GMACs (~335 GFLOPs) forward per 224^2 image.
/// Fixed 224 px resize (set `max_image_size` for native resolution).
[[nodiscard]] inline module_spec vit_h_14() {
  return {.name = "vit-h-14",
          .role = module_role::encoder,
          .arch = vit_encoder_arch{.image_size = 224,
                                   .patch_size = 14,
                                   .layers = 32,
                                   .hidden = 1280,
                                   .heads = 16,
                                   .mlp = 5120,
                                   .channels = 3,
                                   .class_token = true,
                                   .qkv_bias = true,
                                   .max_image_size = 0}};
}

/// @brief InternViT-6B (Chen et al., InternVL, CVPR 2024, Table 1): 48 layers,
/// width 3200, 25 heads, MLP 12800, patch 14, 224 px, no QKV bias; ~5.9B parameters.
/// TP must divide 25 heads, so only TP 1 (or 5) splits it evenly.
[[nodiscard]] inline module_spec internvit_6b() {
  return {.name = "internvit-6b",
          .role = module_role::encoder,
          .arch = vit_encoder_arch{.image_size = 224,
                                   .patch_size = 14,
                                   .layers = 48,
                                   .hidden = 3200,
                                   .heads = 25,
                                   .mlp = 12800,
                                   .channels = 3,
                                   .class_token = true,
                                   .qkv_bias = false,
                                   .max_image_size = 0}};
}

/// @brief SigLIP-L/16 at 384 px (Zhai et al., ICCV 2023; the low-resolution
/// half of DeepSeek-VL's hybrid encoder, Lu et al. 2024): 24 layers, width
/// 1024, 16 heads, MLP 4096, patch 16, no class token (576 tokens per image);
/// ~0.3B parameters.
[[nodiscard]] inline module_spec siglip_l_384() {
  return {.name = "siglip-l-384",
          .role = module_role::encoder,
          .arch = vit_encoder_arch{.image_size = 384,
                                   .patch_size = 16,
                                   .layers = 24,
                                   .hidden = 1024,
                                   .heads = 16,
                                   .mlp = 4096,
                                   .channels = 3,
                                   .class_token = false,
                                   .qkv_bias = true,
                                   .max_image_size = 0}};
}

/// @brief SAM-B's image encoder at 1024 px (Kirillov et al., ICCV 2023: ViT-B/16;
/// the high-resolution half of DeepSeek-VL's hybrid encoder): 12 layers, width
/// 768, 12 heads, MLP 3072, patch 16 (4096 tokens per image); ~0.09B
/// parameters. Priced with global attention in every layer (SAM's windowed
/// layers cost less: an upper bound of its attention time).
[[nodiscard]] inline module_spec sam_b_1024() {
  return {.name = "sam-b-1024",
          .role = module_role::encoder,
          .arch = vit_encoder_arch{.image_size = 1024,
                                   .patch_size = 16,
                                   .layers = 12,
                                   .hidden = 768,
                                   .heads = 12,
                                   .mlp = 3072,
                                   .channels = 3,
                                   .class_token = false,
                                   .qkv_bias = true,
                                   .max_image_size = 0}};
}

// ---- Backbones ---------------------------------------------------------------

/// @brief Llama-3-8B (Meta, "The Llama 3 Herd of Models", 2024, Table 3; HF config):
/// 32 layers, 4096 hidden, 32 heads, 8 KV heads, SwiGLU 14336, vocab 128256,
/// untied head; 8.03B parameters.
[[nodiscard]] inline module_spec llama3_8b() {
  return {.name = "llama-3-8b",
          .role = module_role::backbone,
          .arch = decoder_llm_arch{.layers = 32,
                                   .hidden = 4096,
                                   .heads = 32,
                                   .kv_heads = 8,
                                   .mlp = 14336,
                                   .vocab = 128256,
                                   .max_seq = 8192}};
}

/// @brief Llama-3-70B (same source): 80 layers, 8192 hidden, 64 heads, 8 KV heads,
/// SwiGLU 28672, vocab 128256; 70.6B parameters.
[[nodiscard]] inline module_spec llama3_70b() {
  return {.name = "llama-3-70b",
          .role = module_role::backbone,
          .arch = decoder_llm_arch{.layers = 80,
                                   .hidden = 8192,
                                   .heads = 64,
                                   .kv_heads = 8,
                                   .mlp = 28672,
                                   .vocab = 128256,
                                   .max_seq = 8192}};
}

/// @brief Qwen2-72B (Qwen team, "Qwen2 Technical Report", 2024, Table 1; HF config):
/// 80 layers, 8192 hidden, 64 heads, 8 KV heads, SwiGLU 29568, vocab 152064,
/// QKV bias; 72.7B parameters. The paper's 72B-class backbone.
[[nodiscard]] inline module_spec qwen2_72b() {
  return {.name = "qwen2-72b",
          .role = module_role::backbone,
          .arch = decoder_llm_arch{.layers = 80,
                                   .hidden = 8192,
                                   .heads = 64,
                                   .kv_heads = 8,
                                   .mlp = 29568,
                                   .vocab = 152064,
                                   .max_seq = 32768,
                                   .gated_mlp = true,
                                   .qkv_bias = true}};
}

/// @brief Llama-2-7B (Touvron et al. 2023, Table 1; HF config): 32 layers, 4096
/// hidden, 32 heads (MHA), SwiGLU 11008, vocab 32000; 6.74B parameters.
[[nodiscard]] inline module_spec llama2_7b() {
  return {.name = "llama-2-7b",
          .role = module_role::backbone,
          .arch = decoder_llm_arch{.layers = 32,
                                   .hidden = 4096,
                                   .heads = 32,
                                   .kv_heads = 32,
                                   .mlp = 11008,
                                   .vocab = 32000,
                                   .max_seq = 4096}};
}

/// @brief Llama-2-13B (same source): 40 layers, 5120 hidden, 40 heads, SwiGLU
/// 13824, vocab 32000; 13.0B parameters.
[[nodiscard]] inline module_spec llama2_13b() {
  return {.name = "llama-2-13b",
          .role = module_role::backbone,
          .arch = decoder_llm_arch{.layers = 40,
                                   .hidden = 5120,
                                   .heads = 40,
                                   .kv_heads = 40,
                                   .mlp = 13824,
                                   .vocab = 32000,
                                   .max_seq = 4096}};
}

// ---- Generators ---------------------------------------------------------------

/// @brief Stable Diffusion 2.1 UNet (Rombach et al. 2022; stabilityai/stable-diffusion-2-1):
/// 865M parameters, VAE downsampling 8, 4 latent channels, base 320 channels,
/// 512 px default. FLOPs: ~339 GMACs forward at 512^2 (reported for the SD UNet by
/// Kim et al., BK-SDM, 2023) = 678 GFLOPs over 4096 latent tokens, of which the
/// self-attention's quadratic part is 4*sum_l(blocks_l * c_l / 16^l) = 7300 FLOPs
/// per squared latent token (5 transformer blocks at each of 3 levels with
/// 320/640/1280 channels) = 122 GFLOPs; the linear rest 135.7 MFLOPs per latent
/// token. Activations: ~200 KB per latent token (our estimate from its feature
/// maps; ~0.8 GB per 512^2 image). 25 slices (its 25 resnet/attention blocks)
/// for pipeline cuts.
[[nodiscard]] inline module_spec sd21_unet() {
  return {.name = "sd-2.1-unet",
          .role = module_role::generator,
          .arch = diffusion_arch{.kind = diffusion_kind::unet,
                                 .resolution = 512,
                                 .latent_downsample = 8,
                                 .latent_channels = 4,
                                 .patch_size = 1,
                                 .layers = 25,
                                 .hidden = 320,
                                 .heads = 5,
                                 .mlp = 0,
                                 .learn_sigma = false,
                                 .condition_params = 0,
                                 .params = 865.9e6,
                                 .forward_flops_per_token = 135.7e6,
                                 .forward_flops_per_token_sq = 7300,
                                 .activation_bytes_per_token = 200e3}};
}

/// @brief DiT-XL/2 (Peebles & Xie, ICCV 2023, Tables 1 and 4): 28 adaLN-Zero blocks,
/// width 1152, 16 heads, MLP 4608, latent patch 2, 256 px, class-conditional
/// (1001-entry table); 675M parameters, 118.6 GFLOPs (multiply-adds) per 256^2 image.
[[nodiscard]] inline module_spec dit_xl_2() {
  return {.name = "dit-xl-2",
          .role = module_role::generator,
          .arch = diffusion_arch{.kind = diffusion_kind::dit,
                                 .resolution = 256,
                                 .latent_downsample = 8,
                                 .latent_channels = 4,
                                 .patch_size = 2,
                                 .layers = 28,
                                 .hidden = 1152,
                                 .heads = 16,
                                 .mlp = 4608,
                                 .learn_sigma = true,
                                 .condition_params = 1001.0 * 1152.0}};
}

// ---- GPUs and clusters ---------------------------------------------------------

/// @brief NVIDIA H100 SXM5 80GB (datasheet): 989 dense bf16 TFLOP/s, 67 fp32,
/// 80 GB HBM3 at 3.35 TB/s.
[[nodiscard]] inline gpu_spec h100_sxm() {
  return {.name = "H100-SXM-80GB",
          .peak_bf16_tflops = 989.4,
          .peak_fp32_tflops = 66.9,
          .hbm_bytes = 80e9,
          .hbm_bandwidth_bytes_per_s = 3.35e12};
}
/// @brief NVIDIA H800 SXM5 80GB: H100 compute and memory, NVLink cut to 400 GB/s
/// (bidirectional, i.e. 200 GB/s per direction).
[[nodiscard]] inline gpu_spec h800_sxm() {
  auto g = h100_sxm();
  g.name = "H800-SXM-80GB";
  return g;
}
/// @brief NVIDIA A100 SXM4 80GB (datasheet): 312 dense bf16 TFLOP/s, 19.5 fp32,
/// 80 GB HBM2e at 2.04 TB/s.
[[nodiscard]] inline gpu_spec a100_sxm() {
  return {.name = "A100-SXM-80GB",
          .peak_bf16_tflops = 312,
          .peak_fp32_tflops = 19.5,
          .hbm_bytes = 80e9,
          .hbm_bandwidth_bytes_per_s = 2.039e12};
}

/// @brief DGX-H100-style nodes: 8 GPUs, NVLink 4 (900 GB/s bidirectional =
/// 450 GB/s per direction), one 400 Gb/s NIC per GPU (50 GB/s).
[[nodiscard]] inline cluster_spec h100_cluster(int num_gpus) {
  return {.name = "h100",
          .gpu = h100_sxm(),
          .num_gpus = num_gpus,
          .gpus_per_node = 8,
          .intra_node_bandwidth_bytes_per_s = 450e9,
          .intra_node_latency_s = 5e-6,
          .inter_node_bandwidth_bytes_per_s = 50e9,
          .inter_node_latency_s = 10e-6};
}
/// @brief H800 nodes as in the DistTrain paper: 8 GPUs, NVLink 400 GB/s
/// (200 GB/s per direction), 8 x 400 Gb/s NICs (50 GB/s per GPU).
[[nodiscard]] inline cluster_spec h800_cluster(int num_gpus) {
  return {.name = "h800",
          .gpu = h800_sxm(),
          .num_gpus = num_gpus,
          .gpus_per_node = 8,
          .intra_node_bandwidth_bytes_per_s = 200e9,
          .intra_node_latency_s = 5e-6,
          .inter_node_bandwidth_bytes_per_s = 50e9,
          .inter_node_latency_s = 10e-6};
}
/// @brief DGX-A100 nodes: 8 GPUs, NVLink 3 (600 GB/s bidirectional = 300 per
/// direction), one 200 Gb/s HDR NIC per GPU (25 GB/s).
[[nodiscard]] inline cluster_spec a100_cluster(int num_gpus) {
  return {.name = "a100",
          .gpu = a100_sxm(),
          .num_gpus = num_gpus,
          .gpus_per_node = 8,
          .intra_node_bandwidth_bytes_per_s = 300e9,
          .intra_node_latency_s = 5e-6,
          .inter_node_bandwidth_bytes_per_s = 25e9,
          .inter_node_latency_s = 10e-6};
}

// ---- Data -----------------------------------------------------------------------

/// @brief Longer image side of web images, long-tailed (shape after the LAION-400M
/// size statistics, Schuhmann et al. 2021: most images a few hundred pixels, a
/// tail beyond 1024). Our histogram, not a measurement.
[[nodiscard]] inline distribution web_image_side() {
  return histogram_dist{{256, 384, 512, 768, 1024, 1536, 2048},
                        {0.20, 0.20, 0.25, 0.15, 0.12, 0.05, 0.03}};
}
/// @brief Aspect ratios (short/long) of web images: square, 4:3, 16:9, 2:1.
[[nodiscard]] inline distribution web_image_aspect() {
  return histogram_dist{{1.0, 0.75, 0.5625, 0.5}, {0.35, 0.35, 0.20, 0.10}};
}

/// @brief LAION-400M-like image-text pairs: one input image (web size
/// distribution), a short caption (log-normal, median 20 tokens), and one image
/// to generate (256/512/768 px squares, 30/50/20%).
[[nodiscard]] inline data_spec laion400m_like() {
  data_spec d;
  d.name = "laion-400m";
  d.text_tokens = lognormal_dist{.median = 20, .sigma = 0.6, .min = 3, .max = 256};
  d.images_per_sample = constant_dist{1};
  d.image_side = web_image_side();
  d.image_aspect = web_image_aspect();
  d.generated_per_sample = constant_dist{1};
  d.generated_side = histogram_dist{{256, 512, 768}, {0.3, 0.5, 0.2}};
  d.seed = 0x1a10;
  return d;
}

/// @brief Interleaved image-text documents (MMC4 / OBELICS-like): text log-normal
/// (median 600 tokens, 32..3072), 0-8 input images (mean ~2.8), web-size images,
/// 0-2 images to generate (60/30/10%) at 512 px.
[[nodiscard]] inline data_spec interleaved_image_text() {
  data_spec d;
  d.name = "interleaved";
  d.text_tokens = lognormal_dist{.median = 600, .sigma = 0.7, .min = 32, .max = 3072};
  d.images_per_sample =
      histogram_dist{{0, 1, 2, 3, 4, 5, 6, 8}, {0.10, 0.25, 0.20, 0.15, 0.12, 0.08, 0.05, 0.05}};
  d.image_side = web_image_side();
  d.image_aspect = web_image_aspect();
  d.generated_per_sample = histogram_dist{{0, 1, 2}, {0.6, 0.3, 0.1}};
  d.generated_side = constant_dist{512};
  d.seed = 0x1e4e;
  return d;
}

/// @brief High-resolution image understanding (document / chart / screenshot
/// data, as native-resolution VLMs train on): a short text (log-normal, median
/// 200 tokens), 1-4 input images of 672-1792 px (longer side), one image to
/// generate in ten samples (512 px). Our histogram, not a measurement.
[[nodiscard]] inline data_spec high_res_images() {
  data_spec d;
  d.name = "high-res";
  d.text_tokens = lognormal_dist{.median = 200, .sigma = 0.6, .min = 16, .max = 2048};
  d.images_per_sample = histogram_dist{{1, 2, 3, 4}, {0.4, 0.3, 0.2, 0.1}};
  d.image_side = histogram_dist{{672, 896, 1344, 1792}, {0.25, 0.35, 0.25, 0.15}};
  d.image_aspect = web_image_aspect();
  d.generated_per_sample = histogram_dist{{0, 1}, {0.9, 0.1}};
  d.generated_side = constant_dist{512};
  d.seed = 0x41e5;
  return d;
}

/// @brief Video clips for video understanding: 8-64 frames per sample
/// (16/32/64 most often) at 448x252 (16:9), a caption or question (median 300
/// tokens), and one image to generate in ten samples. Our histogram.
[[nodiscard]] inline data_spec video_clips() {
  data_spec d;
  d.name = "video";
  d.text_tokens = lognormal_dist{.median = 300, .sigma = 0.7, .min = 16, .max = 2048};
  d.images_per_sample = histogram_dist{{8, 16, 32, 64}, {0.15, 0.35, 0.35, 0.15}};
  d.image_side = constant_dist{448};
  d.image_aspect = constant_dist{0.5625};
  d.generated_per_sample = histogram_dist{{0, 1}, {0.9, 0.1}};
  d.generated_side = constant_dist{512};
  d.seed = 0x71de;
  return d;
}

/// @brief LLaVA-style supervised fine-tuning at native resolution, built from
/// the public figure "~99% of samples have 500-1500 image tokens" (LLaVA-
/// style SFT; docs/planner.md, "Your own data"): one input image per sample,
/// square, whose side is log-normal with median 412 px and sigma 0.107, so
/// that a patch-14 encoder without resizing (hires-70b's InternViT) sees
/// log-normal tokens with median 866 (= sqrt(500 x 1500)) and 99% within
/// 500-1500 (sigma of the tokens ln(3) / (2 x 2.576) = 0.213). Our
/// assumptions, not in the figure: one image per sample, text log-normal
/// with median 300 tokens (sigma 0.6, 16-4096), no image to generate.
[[nodiscard]] inline data_spec llava_sft() {
  data_spec d;
  d.name = "llava-sft";
  d.text_tokens = lognormal_dist{.median = 300, .sigma = 0.6, .min = 16, .max = 4096};
  d.images_per_sample = constant_dist{1};
  d.image_side = lognormal_dist{.median = 412, .sigma = 0.107, .min = 196, .max = 1344};
  d.image_aspect = constant_dist{1};
  d.generated_per_sample = constant_dist{0};
  d.seed = 0x11a7a;
  return d;
}

/// @brief OBELICS-like interleaved web documents, built from the public
/// figures of OBELICS (141M documents, 115B text tokens, 353M images: about
/// 2.5 images and 815 text tokens per document; docs/planner.md, "Your own
/// data"): images per document from a histogram of mean 2.51 (0-6 images,
/// our shape), text log-normal with median 592 and sigma 0.8 (mean 815
/// before clamping to 32-8192; our shape), web-size images, nothing to
/// generate.
[[nodiscard]] inline data_spec obelics_like() {
  data_spec d;
  d.name = "obelics";
  d.text_tokens = lognormal_dist{.median = 592, .sigma = 0.8, .min = 32, .max = 8192};
  d.images_per_sample =
      histogram_dist{{0, 1, 2, 3, 4, 5, 6}, {0.05, 0.28, 0.25, 0.17, 0.10, 0.08, 0.07}};
  d.image_side = web_image_side();
  d.image_aspect = web_image_aspect();
  d.generated_per_sample = constant_dist{0};
  d.seed = 0x0be1;
  return d;
}

/// @brief Image generation with an understanding prompt (any-to-image data): a
/// prompt (median 120 tokens), one reference image (web size), and 1-4 images to
/// generate at 768-1024 px. Our histogram.
[[nodiscard]] inline data_spec generation_heavy() {
  data_spec d;
  d.name = "generation";
  d.text_tokens = lognormal_dist{.median = 120, .sigma = 0.6, .min = 8, .max = 1024};
  d.images_per_sample = constant_dist{1};
  d.image_side = web_image_side();
  d.image_aspect = web_image_aspect();
  d.generated_per_sample = histogram_dist{{1, 2, 4}, {0.4, 0.4, 0.2}};
  d.generated_side = histogram_dist{{768, 1024}, {0.5, 0.5}};
  d.seed = 0x6e4a;
  return d;
}

// ---- Multimodal models ------------------------------------------------------------

/// @brief An MLLM: ViT-H/14 at native resolution (longer side capped at 448 px,
/// up to 1025 tokens per image), a pixel-shuffle-style projector (4 patch tokens
/// -> 1 backbone token), `backbone`, and SD-2.1 conditioned on 64 query tokens.
/// All modules trainable.
[[nodiscard]] inline model_spec mllm(std::string name, module_spec backbone) {
  auto enc = vit_h_14();
  std::get<vit_encoder_arch>(enc.arch).max_image_size = 448;
  return {.name = std::move(name),
          .modules = {enc, std::move(backbone), sd21_unet()},
          .connections = {},
          .projector_tokens_per_image = 0,
          .projector_patch_ratio = 4,
          .generator_condition_tokens = 64};
}
/// @brief ViT-H + Llama-2-7B + SD-2.1.
[[nodiscard]] inline model_spec mllm_7b() { return mllm("mllm-7b", llama2_7b()); }
/// @brief ViT-H + Llama-2-13B + SD-2.1.
[[nodiscard]] inline model_spec mllm_13b() { return mllm("mllm-13b", llama2_13b()); }
/// @brief ViT-H + Llama-3-70B + SD-2.1.
[[nodiscard]] inline model_spec mllm_70b() { return mllm("mllm-70b", llama3_70b()); }
/// @brief The DistTrain paper's 72B setting: ViT-H + a 72B backbone (Qwen2-72B) + SD-2.1.
[[nodiscard]] inline model_spec paper_72b() { return mllm("paper-72b", qwen2_72b()); }
/// @brief An encoder-heavy MLLM: InternViT-6B at native resolution (longer side
/// capped at 1344 px, up to 9217 tokens per image) + Llama-3-70B + SD-2.1.
[[nodiscard]] inline model_spec hires_70b() {
  auto m = mllm("hires-70b", llama3_70b());
  auto enc = internvit_6b();
  std::get<vit_encoder_arch>(enc.arch).max_image_size = 1344;
  m.modules[0] = enc;
  return m;
}

/// @brief A two-encoder MLLM after DeepSeek-VL's hybrid vision encoder: every
/// input image goes through SigLIP-L at 384 px and SAM-B at 1024 px, whose
/// features the projector fuses into 576 backbone tokens per image, then
/// Llama-2-7B and SD-2.1. The pipeline runs the encoders one after the other
/// (SigLIP's output is forwarded through SAM's GPUs: docs/planner.md,
/// "Several encoders or generators").
[[nodiscard]] inline model_spec dual_7b() {
  return {.name = "dual-7b",
          .modules = {siglip_l_384(), sam_b_1024(), llama2_7b(), sd21_unet()},
          .connections = {},
          .projector_tokens_per_image = 576,
          .projector_patch_ratio = 1,
          .generator_condition_tokens = 64};
}

// ---- Registries ----------------------------------------------------------------------

namespace detail {
template <class T>
struct named {
  std::string_view name;
  T (*make)();
};
inline constexpr named<module_spec> module_table[] = {
    {"vit-h-14", vit_h_14},     {"internvit-6b", internvit_6b}, {"siglip-l-384", siglip_l_384},
    {"sam-b-1024", sam_b_1024}, {"llama-3-8b", llama3_8b},      {"llama-3-70b", llama3_70b},
    {"qwen2-72b", qwen2_72b},   {"llama-2-7b", llama2_7b},      {"llama-2-13b", llama2_13b},
    {"sd-2.1-unet", sd21_unet}, {"dit-xl-2", dit_xl_2}};
inline constexpr named<model_spec> model_table[] = {
    {"mllm-7b", mllm_7b},     {"mllm-13b", mllm_13b},   {"mllm-70b", mllm_70b},
    {"paper-72b", paper_72b}, {"hires-70b", hires_70b}, {"dual-7b", dual_7b}};
inline constexpr named<data_spec> data_table[] = {
    {"laion-400m", laion400m_like},   {"interleaved", interleaved_image_text},
    {"high-res", high_res_images},    {"video", video_clips},
    {"generation", generation_heavy}, {"llava-sft", llava_sft},
    {"obelics", obelics_like}};

template <class T, std::size_t N>
[[nodiscard]] T find(const named<T> (&table)[N], std::string_view name, std::string_view kind) {
  for (const auto& e : table)
    if (e.name == name) return e.make();
  std::string known;
  for (const auto& e : table) {
    if (!known.empty()) known += ", ";
    known += e.name;
  }
  disttrain::fail(errc::invalid_argument, "preset", "unknown ", kind, " preset '", name,
                  "' (known: ", known, ")");
}
template <class T, std::size_t N>
[[nodiscard]] std::vector<std::string> names(const named<T> (&table)[N]) {
  std::vector<std::string> v;
  for (const auto& e : table) v.emplace_back(e.name);
  return v;
}
}  // namespace detail

/// @brief Module preset by name: vit-h-14, internvit-6b, siglip-l-384, sam-b-1024,
/// llama-3-8b, llama-3-70b,
/// qwen2-72b, llama-2-7b, llama-2-13b, sd-2.1-unet, dit-xl-2.
[[nodiscard]] inline module_spec module_preset(std::string_view name) {
  return detail::find(detail::module_table, name, "module");
}
[[nodiscard]] inline std::vector<std::string> module_preset_names() {
  return detail::names(detail::module_table);
}

/// @brief Model preset by name: mllm-7b, mllm-13b, mllm-70b, paper-72b, hires-70b, dual-7b.
[[nodiscard]] inline model_spec model_preset(std::string_view name) {
  return detail::find(detail::model_table, name, "model");
}
[[nodiscard]] inline std::vector<std::string> model_preset_names() {
  return detail::names(detail::model_table);
}

/// @brief Data preset by name: laion-400m, interleaved, high-res, video, generation,
/// llava-sft, obelics.
[[nodiscard]] inline data_spec data_preset(std::string_view name) {
  return detail::find(detail::data_table, name, "data");
}
[[nodiscard]] inline std::vector<std::string> data_preset_names() {
  return detail::names(detail::data_table);
}

/// @brief Cluster preset by name (h100, h800, a100) with `num_gpus` GPUs.
[[nodiscard]] inline cluster_spec cluster_preset(std::string_view name, int num_gpus) {
  disttrain::require_positive(num_gpus, "cluster.num_gpus");
  if (name == "h100") return h100_cluster(num_gpus);
  if (name == "h800") return h800_cluster(num_gpus);
  if (name == "a100") return a100_cluster(num_gpus);
  disttrain::fail(errc::invalid_argument, "preset", "unknown cluster preset '", name,
                  "' (known: h100, h800, a100)");
}
[[nodiscard]] inline std::vector<std::string> cluster_preset_names() {
  return {"h100", "h800", "a100"};
}

/// @brief Figures a paper reports for a scenario preset, to print next to the
/// modelled ones (`published("paper-72b")`).
struct published_figures {
  double mfu = 0;           ///< reported model FLOPs utilisation
  double speedup = 0;       ///< reported best throughput ratio over Megatron-LM
  std::string_view source;  ///< where the figures come from
};

/// @brief The published figures of scenario preset `name`, if any: paper-72b
/// is DistTrain's 72B setting (SIGCOMM'25: 54.7% MFU on 1172 H800 GPUs, up to
/// 2.2x Megatron-LM's throughput with orchestration, data reordering and
/// disaggregated preprocessing together).
[[nodiscard]] inline std::optional<published_figures> published(std::string_view name) {
  if (name == "paper-72b")
    return published_figures{0.547, 2.2,
                             "DistTrain (SIGCOMM'25): 72B MLLM on 1172 H800 GPUs; the speedup "
                             "includes data reordering and disaggregated preprocessing"};
  return std::nullopt;
}

/// @brief The scenario presets' names, in the order they are documented.
[[nodiscard]] inline std::vector<std::string> scenario_preset_names() {
  return {"mllm-7b",   "mllm-13b",  "mllm-70b", "paper-72b",
          "hires-70b", "video-70b", "gen-70b",  "dual-7b"};
}

/// @brief Planning scenarios (our choices of cluster size and batch, H800 clusters):
/// - `mllm-7b`:  mllm_7b, 64 GPUs, interleaved data, 256 samples per iteration;
/// - `mllm-13b`: mllm_13b, 128 GPUs, interleaved, 256;
/// - `mllm-70b`: mllm_70b, 512 GPUs, interleaved, 512;
/// - `paper-72b`: paper_72b on 1172 H800 GPUs (the paper's scale), interleaved, 1024;
/// - `hires-70b`: hires_70b (InternViT-6B encoder), 512 GPUs, high-res data, 512;
/// - `video-70b`: mllm_70b, 512 GPUs, video data, 512;
/// - `gen-70b`: mllm_70b, 512 GPUs, generation-heavy data, 512;
/// - `dual-7b`: dual_7b (two encoders: SigLIP-L + SAM-B), 64 GPUs, interleaved, 256.
[[nodiscard]] inline scenario scenario_preset(std::string_view name) {
  auto make = [](std::string n, std::string desc, model_spec m, int gpus, int batch,
                 data_spec data = interleaved_image_text()) {
    return scenario{.name = std::move(n),
                    .description = std::move(desc),
                    .model = std::move(m),
                    .cluster = h800_cluster(gpus),
                    .data = std::move(data),
                    .global_batch_size = batch};
  };
  if (name == "mllm-7b")
    return make("mllm-7b", "ViT-H/14 + Llama-2-7B + SD-2.1 on 64 H800, interleaved data, batch 256",
                mllm_7b(), 64, 256);
  if (name == "mllm-13b")
    return make("mllm-13b",
                "ViT-H/14 + Llama-2-13B + SD-2.1 on 128 H800, interleaved data, batch 256",
                mllm_13b(), 128, 256);
  if (name == "mllm-70b")
    return make("mllm-70b",
                "ViT-H/14 + Llama-3-70B + SD-2.1 on 512 H800, interleaved data, batch 512",
                mllm_70b(), 512, 512);
  if (name == "paper-72b")
    return make("paper-72b",
                "DistTrain's 72B setting: ViT-H/14 + Qwen2-72B + SD-2.1 on 1172 H800, interleaved "
                "data, batch 1024",
                paper_72b(), 1172, 1024);
  if (name == "hires-70b")
    return make("hires-70b",
                "encoder-heavy: InternViT-6B at native resolution (<= 1344 px) + Llama-3-70B + "
                "SD-2.1 on 512 H800, high-resolution images, batch 512",
                hires_70b(), 512, 512, high_res_images());
  if (name == "video-70b")
    return make("video-70b",
                "encoder-heavy: ViT-H/14 + Llama-3-70B + SD-2.1 on 512 H800, video clips of 8-64 "
                "frames, batch 512",
                mllm_70b(), 512, 512, video_clips());
  if (name == "gen-70b")
    return make("gen-70b",
                "generator-heavy: ViT-H/14 + Llama-3-70B + SD-2.1 on 512 H800, 1-4 images to "
                "generate at 768-1024 px per sample, batch 512",
                mllm_70b(), 512, 512, generation_heavy());
  if (name == "dual-7b")
    return make("dual-7b",
                "two encoders: SigLIP-L/16 at 384 px + SAM-B at 1024 px (DeepSeek-VL's hybrid "
                "encoder) + Llama-2-7B + SD-2.1 on 64 H800, interleaved data, batch 256",
                dual_7b(), 64, 256);
  std::string known;
  for (const auto& n : scenario_preset_names()) known += (known.empty() ? "" : ", ") + n;
  disttrain::fail(errc::invalid_argument, "preset", "unknown scenario preset '", name,
                  "' (known: ", known, ")");
}

}  // namespace disttrain::presets
