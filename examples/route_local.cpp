// Move one microbatch's encoder outputs to the backbone across a module
// boundary with a different parallel layout on each side: the encoder runs
// TP 1 x DP 2, the backbone TP 2 x DP 3 (8 ranks, one thread each on the
// local backend). The reorderer decides which replica holds which sample on
// each side; plan_boundary_route turns the two placements into messages
// (every element crosses once, then each TP pair completes its copy), and
// run_route executes them. Every received element is checked against the
// value its sender wrote (exit 1 on any difference).
//
//   ./example_route_local
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <thread>
#include <vector>

#include "disttrain/comm.hpp"
#include "disttrain/comm/local_backend.hpp"

namespace {

constexpr int hidden = 64;  // elements per row (one row per image token)

// The value a sender writes for sample s, row i, column c.
float value(int s, std::int64_t i, int c) {
  return static_cast<float>(s * 100000 + i * hidden + c);
}

}  // namespace

int main() {
  try {
    // Samples of one microbatch with 1-5 images of 16 tokens each; the placements as a reorderer
    // would give them (any sample -> replica map works, uneven ones too).
    const std::vector<std::int64_t> rows{16, 80, 32, 48, 16, 64, 32, 16, 48};
    const std::vector<int> on_encoder{0, 1, 1, 0, 0, 1, 0, 1, 0};
    const std::vector<int> on_backbone{2, 0, 1, 1, 2, 0, 2, 1, 0};
    const auto pa = disttrain::sample_placement::from_replica_map(on_encoder, 2);
    const auto pb = disttrain::sample_placement::from_replica_map(on_backbone, 3);
    // Modules in pipeline order: {name, role, tp, pp, dp}; 8 GPUs per node, every TP group
    // inside one node.
    const disttrain::topology layout({{"vit", disttrain::module_role::encoder, 1, 1, 2},
                                      {"llm", disttrain::module_role::backbone, 2, 1, 3}});
    disttrain::require_tp_in_nodes(layout, 8, "route_local");
    const disttrain::activation_shape shape{rows, hidden, sizeof(float)};
    const auto plan = disttrain::plan_boundary_route(layout, 0, pa, pb, shape);

    const int world_size = layout.world_size();
    std::vector<std::vector<float>> src(static_cast<std::size_t>(world_size)),
        dst(static_cast<std::size_t>(world_size));
    for (int r = 0; r < world_size; ++r) {
      auto& s = src[static_cast<std::size_t>(r)];
      s.resize(static_cast<std::size_t>(plan.source_elements(r)));
      dst[static_cast<std::size_t>(r)].resize(
          static_cast<std::size_t>(plan.destination_elements(r)));
      const auto c = layout.coord(r);
      if (c.module != disttrain::module_id{0}) continue;
      std::size_t at = 0;  // a replica's buffer: its samples' rows, in placement order
      for (int smp : pa.samples(c.replica.value))
        for (std::int64_t i = 0; i < rows[static_cast<std::size_t>(smp)]; ++i)
          for (int col = 0; col < hidden; ++col) s[at++] = value(smp, i, col);
    }

    disttrain::local_world world(world_size, {std::chrono::milliseconds(5000)});
    std::vector<std::thread> threads;
    std::vector<std::exception_ptr> errors(static_cast<std::size_t>(world_size));
    for (int r = 0; r < world_size; ++r)
      threads.emplace_back([&, r] {
        try {
          auto backend = world.endpoint(r);
          disttrain::buffer_pool pool;
          disttrain::run_route(backend, plan,
                               std::as_bytes(std::span(src[static_cast<std::size_t>(r)])),
                               std::as_writable_bytes(std::span(dst[static_cast<std::size_t>(r)])),
                               pool, {.tag = 1});
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);

    // Every backbone rank (both TP ranks of each replica) holds its replica's samples in full.
    long long wrong = 0, checked = 0;
    for (int r = 0; r < world_size; ++r) {
      const auto c = layout.coord(r);
      if (c.module != disttrain::module_id{1}) continue;
      const auto& d = dst[static_cast<std::size_t>(r)];
      std::size_t at = 0;
      for (int smp : pb.samples(c.replica.value))
        for (std::int64_t i = 0; i < rows[static_cast<std::size_t>(smp)]; ++i)
          for (int col = 0; col < hidden; ++col, ++checked)
            if (d[at++] != value(smp, i, col)) ++wrong;
    }
    std::int64_t moved = 0;
    for (const auto& m : plan.messages()) moved += m.elements;
    std::printf(
        "%zu messages, %lld elements moved, %lld elements checked on the backbone, %lld wrong\n",
        plan.messages().size(), static_cast<long long>(moved), checked, wrong);
    return wrong == 0 && checked > 0 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
