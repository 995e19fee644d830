#pragma once
// The synthetic pipeline workload shared by the overlap benchmarks
// (bench_exec.cpp over modelled links, mpi/bench_exec_mpi.cpp over MPI):
//   - `synthetic_host<Compute>`: an exec_host whose F and B = 2F "compute" by
//     calling `Compute{}(duration)` (a timed sleep, so ranks do not compete
//     for cores);
//   - `synthetic_programs`: a schedule's bound programs whose activation
//     messages are `message_bytes` long and whose gradient messages are
//     twice that (sized like the backward pass);
//   - `synthetic_durations`: the same workload for the simulator (sim/), so
//     each benchmark can print the simulator's prediction beside the run.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/exec.hpp"
#include "disttrain/schedule/bind_schedule.hpp"
#include "disttrain/schedule/op.hpp"
#include "disttrain/schedule/schedule.hpp"

namespace disttrain::bench {

template <class Compute>
struct synthetic_host {
  using grad_type = float;
  std::chrono::steady_clock::duration forward_time{};
  std::map<std::pair<int, int>, std::vector<std::byte>> buffers{};  // (kind, mb)
  std::vector<float> bucket = std::vector<float>(16, 1.0f);

  void forward(const disttrain::schedule_op&) { Compute{}(forward_time); }
  void backward(const disttrain::schedule_op&) { Compute{}(2 * forward_time); }
  void weight(const disttrain::schedule_op&) {}
  void optimizer_step(const disttrain::schedule_op&) {}
  std::span<std::byte> payload(const disttrain::bound_op& m) {
    auto& b = buffers[{static_cast<int>(m.op.kind), m.op.microbatch}];
    b.resize(static_cast<std::size_t>(m.bytes));
    return std::span(b);
  }
  void received(const disttrain::bound_op&) {}
  disttrain::grad_bucket<float> bucket_ready(const disttrain::schedule_op&) {
    return {std::span(bucket)};
  }
  void bucket_reduced(const disttrain::schedule_op&) {}
};

// The bound programs of `s` with activation messages of `message_bytes` and
// gradient messages of twice that.
inline disttrain::bound_world synthetic_programs(const disttrain::pipeline_schedule& s,
                                                 std::size_t message_bytes) {
  return disttrain::bind_schedule(s, [message_bytes](const disttrain::schedule_op& op) {
    const bool grad =
        op.kind == disttrain::op_kind::send_grad || op.kind == disttrain::op_kind::recv_grad;
    return static_cast<std::int64_t>(grad ? 2 * message_bytes : message_bytes);
  });
}

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
