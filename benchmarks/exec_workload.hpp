#pragma once
// The synthetic pipeline workload shared by the overlap benchmarks
// (bench_exec.cpp over modelled links, mpi/bench_exec_mpi.cpp over MPI):
//   - `synthetic_host<Compute>`: an exec_host whose F and B = 2F "compute" by
//     calling `Compute{}(duration)` (a timed sleep, so ranks do not compete
//     for cores), whose activation messages are `message_bytes` long and
//     whose gradient messages are twice that (sized like the backward pass);
//   - `synthetic_durations`: the same workload for the simulator (sim/), so
//     each benchmark can print the simulator's prediction beside the run.

#include <chrono>
#include <cstddef>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/exec.hpp"
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain::bench {

template <class Compute>
struct synthetic_host {
  using grad_type = float;
  std::chrono::steady_clock::duration forward_time{};
  std::size_t message_bytes = 0;
  std::vector<int> group;  // the ranks of this rank's gradient bucket
  std::map<std::pair<int, int>, std::vector<std::byte>> buffers{};  // (kind, mb)
  std::vector<float> bucket = std::vector<float>(16, 1.0f);

  void forward(const disttrain::schedule_op&) { Compute{}(forward_time); }
  void backward(const disttrain::schedule_op&) { Compute{}(2 * forward_time); }
  void weight(const disttrain::schedule_op&) {}
  void optimizer_step(const disttrain::schedule_op&) {}
  void messages(const disttrain::schedule_op& op, std::vector<disttrain::exec_message>& out) {
    auto& b = buffers[{static_cast<int>(op.kind), op.microbatch}];
    const bool grad =
        op.kind == disttrain::op_kind::send_grad || op.kind == disttrain::op_kind::recv_grad;
    b.resize(grad ? 2 * message_bytes : message_bytes);
    out.push_back({op.peer, std::span(b)});
  }
  void received(const disttrain::schedule_op&) {}
  disttrain::grad_bucket<float> bucket_ready(const disttrain::schedule_op&) {
    return {std::span(bucket), std::span(group)};
  }
  void bucket_reduced(const disttrain::schedule_op&) {}
};

// F and B = 2F in seconds; an activation message takes `act` seconds on its
// link, a gradient message `grad`; no gradient-sync time.
struct synthetic_durations {
  double forward = 0, act = 0, grad = 0;
  [[nodiscard]] double compute(int, const disttrain::bound_op& b) const {
    return b.op.kind == disttrain::op_kind::forward    ? forward
           : b.op.kind == disttrain::op_kind::backward ? 2 * forward
                                                       : 0.0;
  }
  [[nodiscard]] double transfer(int, int, const disttrain::bound_op& b) const {
    return b.op.kind == disttrain::op_kind::send_grad ? grad : act;
  }
  [[nodiscard]] double reduce(int, const disttrain::bound_op&) const { return 0; }
  [[nodiscard]] double activation_bytes(int, const disttrain::bound_op&) const { return 1; }
};

}  // namespace disttrain::bench
