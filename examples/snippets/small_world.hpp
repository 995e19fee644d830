#pragma once
// A small bound pipeline for the examples that bind programs (schedule, sim,
// exec, bind): enc (DP 2) -> llm (PP 2) -> gen, 5 ranks, 8 samples of uneven
// cost reordered into 4 microbatches, 1..3 rows of 4 floats per sample and link.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/reorder/reorderer.hpp"

namespace snippets {

struct small_world {
  disttrain::topology topo{{{"enc", disttrain::module_role::encoder, 1, 1, 2},
                            {"llm", disttrain::module_role::backbone, 1, 2, 1},
                            {"gen", disttrain::module_role::generator, 1, 1, 1}}};
  disttrain::pipeline_schedule chain = disttrain::chain_program(topo, {.microbatches = 4});
  disttrain::reorder_result map;
  std::vector<disttrain::link_shape> shapes;

  small_world() {
    disttrain::reorderer<> r(disttrain::reorder_options_of(topo, 4));
    std::vector<disttrain::sample_meta> batch;
    for (std::uint64_t i = 0; i < 8; ++i) {
      disttrain::sample_meta m;
      m.id = i;
      for (std::size_t k = 0; k < topo.owning_modules().size(); ++k)
        m.cost[k] = 1.0 + static_cast<double>((i * 7 + k * 3) % 5);
      batch.push_back(m);
    }
    map = r.assign(batch);
    shapes.resize(static_cast<std::size_t>(topo.num_chain_stages() - 1));
    for (auto& l : shapes) {
      l.hidden = 4;
      l.elem_size = sizeof(float);
      for (const auto& s : map.samples) l.rows.push_back(1 + static_cast<std::int64_t>(s.id % 3));
    }
  }
};

}  // namespace snippets
