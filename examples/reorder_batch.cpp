// Reorder one global batch of image-text-image samples for a three-module
// pipeline (encoder DP 2, backbone DP 4, generator DP 2, 16 microbatches):
// the reorderer's sample -> (microbatch, replica) map against the batch as it
// arrived, by the modelled 1F1B iteration time and each module's imbalance.
// Checks that every sample is placed exactly once per module and that the
// reordered batch is never slower than the arrival order (exit 1 otherwise).
//
//   ./example_reorder_batch
#include <array>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <random>
#include <vector>

#include "disttrain/reorder.hpp"

namespace {

struct sample {
  std::uint64_t id;
  std::uint32_t images;     // input images (the encoder's work)
  std::uint32_t text;       // text tokens
  std::uint32_t generated;  // output images (the generator's work)
};

// Every sample in exactly one cell of each module.
bool placed_once(const disttrain::reorder_result& r, std::size_t n) {
  for (std::uint32_t k = 0; k < r.modules; ++k) {
    std::vector<int> seen(n, 0);
    for (std::uint32_t j = 0; j < r.microbatches; ++j)
      for (std::uint32_t rep = 0; rep < r.dp[k]; ++rep)
        for (const std::uint32_t s : r.cell(k, rep, j)) ++seen[s];
    for (int c : seen)
      if (c != 1) return false;
  }
  return true;
}

}  // namespace

int main() {
  try {
    // 512 samples: most have 0-2 images, one in 16 has 8-16 (a document with many pages);
    // one in 4 asks for a generated image; log-normal text.
    std::mt19937_64 rng(7);
    std::uniform_int_distribution<std::uint32_t> few(0, 2), many(8, 16), one_in(0, 15);
    std::lognormal_distribution<double> text(6.0, 0.7);
    std::vector<sample> batch;
    for (std::uint64_t i = 0; i < 512; ++i)
      batch.push_back({i, one_in(rng) == 0 ? many(rng) : few(rng),
                       static_cast<std::uint32_t>(text(rng)), one_in(rng) < 4 ? 1u : 0u});

    // Seconds per sample and module: 576 patches per image through the encoder; the backbone
    // sees text + 64 tokens per image (linear + attention); the generator runs per image.
    const auto cost = [](const sample& s) {
      const double seq = s.text + 64.0 * s.images;
      return std::array<double, 3>{2e-6 * 576 * s.images, 4e-6 * seq + 2e-10 * seq * seq,
                                   3e-3 * s.generated};
    };
    std::vector<disttrain::sample_meta> meta;
    disttrain::describe_batch(batch, cost, meta);

    disttrain::reorder_options o;
    o.modules = {{.name = "encoder", .dp = 2},
                 {.name = "backbone", .dp = 4},
                 {.name = "generator", .dp = 2}};
    o.microbatches = 16;
    const auto reordered = disttrain::reorderer<>(o).assign(meta);
    const auto arrival = disttrain::reorderer<>(disttrain::arrival_order(o)).assign(meta);

    std::printf("%-10s %18s %18s\n", "", "arrival order", "reordered");
    std::printf("%-10s %17.2fms %17.2fms\n", "iteration", 1e3 * arrival.iteration_time,
                1e3 * reordered.iteration_time);
    for (std::uint32_t k = 0; k < 3; ++k)
      std::printf("%-10s %18.3f %18.3f   (imbalance: sum of slowest replicas / ideal)\n",
                  o.modules[k].name.c_str(), arrival.imbalance[k], reordered.imbalance[k]);
    std::printf("speedup of the modelled iteration: %.3fx\n",
                arrival.iteration_time / reordered.iteration_time);
    const bool ok = placed_once(reordered, batch.size()) && placed_once(arrival, batch.size()) &&
                    reordered.iteration_time <= arrival.iteration_time;
    return ok ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
