#pragma once
// A small bound pipeline for the examples that bind programs (schedule, sim,
// exec, bind): enc (DP 2) -> llm (PP 2) -> gen, 5 ranks, 8 samples of uneven
// cost reordered into 4 microbatches, 1..3 rows of 4 floats per sample and link.

#include <cstddef>
#include <cstdint>
#include <span>
#include <type_traits>
#include <vector>

#include "disttrain/bind/activation_buffers.hpp"
#include "disttrain/bind/bind.hpp"
#include "disttrain/exec/host.hpp"
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
      disttrain::link_field& f = l.fields.emplace_back();
      f.hidden = 4;
      f.elem_size = sizeof(float);
      for (const auto& s : map.samples) f.rows.push_back(1 + static_cast<std::int64_t>(s.id % 3));
    }
  }
};

// A host of bound programs (a exec_host) whose activations are
// elements of type T: F copies its input to its output (chain stage 0 writes
// ones), B sends back the gradient it received (the last stage writes ones);
// one gradient bucket. Byte activations (plan_link_shapes' rows) are left as
// they are: only their transfer matters.
template <class T>
struct basic_bound_host {
  using grad_type = float;
  disttrain::activation_buffers<T> buf;
  std::vector<float> bucket = std::vector<float>(1, 0.0f);
  int forwards = 0;

  void forward(const disttrain::schedule_op& op) {
    ++forwards;
    if constexpr (std::is_same_v<T, std::byte>) return;
    auto x = buf.input(op.microbatch);
    auto y = buf.output(op.microbatch);
    for (std::size_t i = 0; i < y.size(); ++i) y[i] = i < x.size() ? x[i] : T{1};
  }
  void backward(const disttrain::schedule_op& op) {
    bucket[0] += 1.0f;
    if constexpr (std::is_same_v<T, std::byte>) return;
    auto dx = buf.input_grad(op.microbatch);
    auto dy = buf.output_grad(op.microbatch);
    for (std::size_t i = 0; i < dx.size(); ++i) dx[i] = i < dy.size() ? dy[i] : T{1};
  }
  void weight(const disttrain::schedule_op&) {}
  void optimizer_step(const disttrain::schedule_op&) {}
  disttrain::grad_bucket<float> bucket_ready(const disttrain::schedule_op&) {
    return {std::span(bucket)};
  }
  void bucket_reduced(const disttrain::schedule_op&) {}
  std::span<std::byte> payload(const disttrain::bound_op& b) { return buf.payload(b); }
  void received(const disttrain::bound_op& b) { buf.received(b); }
};
// small_world's links carry floats.
using bound_host = basic_bound_host<float>;
static_assert(disttrain::exec_host<bound_host>);

}  // namespace snippets
