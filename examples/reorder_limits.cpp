// Per-microbatch limits: a batch of image-text samples is reordered for an
// encoder (2 replicas) and a backbone (4 replicas) under each replica's memory
// budget per microbatch (max_tokens) and a fixed micro-batch size
// (max_samples). Prints the fullest cell of each module with and without the
// limits, then a limit no split can keep and the error that names the sample.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <random>
#include <vector>

#include "disttrain/reorder.hpp"

namespace {

struct image_text {
  std::uint64_t id;
  std::uint32_t patches;  // encoder tokens (all images of the sample)
  std::uint32_t text;     // text tokens
};

// Fullest cell of module k: tokens and samples.
std::pair<std::uint64_t, std::size_t> fullest(const disttrain::reorder_result& r,
                                              const std::vector<disttrain::sample_meta>& by_id,
                                              const disttrain::reorder_options& o, std::size_t k) {
  std::uint64_t tokens = 0;
  std::size_t samples = 0;
  for (std::uint32_t j = 0; j < o.microbatches; ++j)
    for (std::uint32_t rep = 0; rep < o.modules[k].dp; ++rep) {
      std::uint64_t t = 0;
      for (const std::uint32_t x : r.cell(k, rep, j)) t += by_id[x].tokens[k];
      tokens = std::max(tokens, t);
      samples = std::max(samples, r.cell(k, rep, j).size());
    }
  return {tokens, samples};
}

}  // namespace

int main() {
  // 128 samples: 0-6 images of 256 patches each, log-normal text.
  std::mt19937_64 rng(42);
  std::uniform_int_distribution<std::uint32_t> images(0, 6);
  std::lognormal_distribution<double> text(6.0, 0.8);
  std::vector<image_text> batch;
  for (std::uint64_t i = 0; i < 128; ++i)
    batch.push_back({i, 256 * images(rng), static_cast<std::uint32_t>(text(rng))});

  // Costs: encoder linear in patches, backbone in the sequence (text + patches / 4).
  const auto cost = [](const image_text& s) {
    const double seq = s.text + s.patches / 4.0;
    return std::array<double, 2>{1e-6 * s.patches, 2e-6 * seq + 1e-10 * seq * seq};
  };
  std::vector<disttrain::sample_meta> meta;
  disttrain::describe_batch(batch, cost, meta);
  for (std::size_t i = 0; i < batch.size(); ++i)
    meta[i].tokens = {batch[i].patches, batch[i].text + batch[i].patches / 4};

  disttrain::reorder_options o;
  o.modules = {{.name = "encoder", .dp = 2}, {.name = "backbone", .dp = 4}};
  o.microbatches = 8;
  const auto free_result = disttrain::reorderer<>(o).assign(meta);

  o.modules[0].max_tokens = 6144;  // the encoder's activation budget per microbatch
  o.modules[1].max_tokens = 4096;  // the backbone's
  o.modules[1].max_samples = 4;    // and its fixed micro-batch size
  const auto limited = disttrain::reorderer<>(o).assign(meta);

  // meta is in id order (ids 0..127), as the result's sample indices are.
  std::printf("%-9s %-22s %-22s %s\n", "module", "unlimited: tokens/cell", "limited: tokens/cell",
              "limit");
  for (std::size_t k = 0; k < 2; ++k) {
    const auto [ft, fs] = fullest(free_result, meta, o, k);
    const auto [lt, ls] = fullest(limited, meta, o, k);
    std::printf("%-9s %8llu (%zu samples)  %8llu (%zu samples)  %llu tokens",
                o.modules[k].name.c_str(), static_cast<unsigned long long>(ft), fs,
                static_cast<unsigned long long>(lt), ls,
                static_cast<unsigned long long>(o.modules[k].max_tokens));
    if (o.modules[k].max_samples != 0) std::printf(", %u samples", o.modules[k].max_samples);
    std::printf("\n");
    if (lt > o.modules[k].max_tokens ||
        (o.modules[k].max_samples != 0 && ls > o.modules[k].max_samples))
      return 1;
  }
  std::printf("modelled iteration time: %.4f (unlimited %.4f)\n", limited.iteration_time,
              free_result.iteration_time);

  // A budget below the largest sample cannot be kept by any split.
  o.modules[0].max_tokens = 1024;
  try {
    (void)disttrain::reorderer<>(o).assign(meta);
    return 1;
  } catch (const disttrain::error& e) {
    std::printf("max_tokens 1024 for the encoder: %s\n", e.what());
    return e.code() == disttrain::errc::infeasible ? 0 : 1;
  }
}
