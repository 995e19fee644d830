// Train one step of a 4-stage pipeline under 1F1B with the executor: one
// thread per stage on the local backend, 8 microbatches. Stage s scales its
// input by a weight w_s (y = w_s x), the loss is the sum of the last stage's
// outputs. `bind_schedule` turns the schedule into bound programs (each
// message with its peer, bytes and tag); the executor runs each rank's ops
// (F, B, the sends and receives between stages) in order, overlapping
// transfers with compute; the host supplies the math and the message buffers. Every stage's
// weight gradient is compared with the same model run serially (exit 1 on a
// difference).
//
//   ./example_executor_1f1b
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <map>
#include <span>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/schedule.hpp"

namespace {

constexpr int stages = 4, microbatches = 8, width = 32;

double weight_of(int s) { return 1.0 + 0.25 * s; }
double input(int mb, int i) { return 0.01 * (mb + 1) * (i + 1); }

// The host of one pipeline stage: its activations and gradients by microbatch.
struct stage_host {
  using grad_type = double;
  int stage = 0;
  double w = 1.0, grad = 0.0;                       // the weight and its gradient
  std::map<int, std::vector<double>> x, y, gy, gx;  // input, output and their gradients

  void forward(const disttrain::schedule_op& op) {
    auto& in = x[op.microbatch];
    if (stage == 0) {
      in.resize(width);
      for (int i = 0; i < width; ++i) in[static_cast<std::size_t>(i)] = input(op.microbatch, i);
    }
    auto& out = y[op.microbatch];
    out.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) out[i] = w * in[i];
  }
  void backward(const disttrain::schedule_op& op) {
    const auto& in = x.at(op.microbatch);
    std::vector<double> g =
        stage == stages - 1 ? std::vector<double>(in.size(), 1.0) : gy.at(op.microbatch);  // dL/dy
    auto& gin = gx[op.microbatch];
    gin.resize(in.size());
    for (std::size_t i = 0; i < in.size(); ++i) {
      grad += g[i] * in[i];
      gin[i] = w * g[i];
    }
    x.erase(op.microbatch);  // this microbatch's activations are no longer needed
  }
  void weight(const disttrain::schedule_op&) {}
  void optimizer_step(const disttrain::schedule_op&) {}  // add_grad_sync's ops; not used here
  // The buffer each send reads or each receive fills.
  std::span<std::byte> payload(const disttrain::bound_op& b) {
    const disttrain::schedule_op& op = b.op;
    std::vector<double>* buf = nullptr;
    switch (op.kind) {
      case disttrain::op_kind::send_act: buf = &y.at(op.microbatch); break;
      case disttrain::op_kind::send_grad: buf = &gx.at(op.microbatch); break;
      case disttrain::op_kind::recv_act:
        buf = &(x[op.microbatch] = std::vector<double>(width));
        break;
      default: buf = &(gy[op.microbatch] = std::vector<double>(width)); break;  // recv_grad
    }
    return std::as_writable_bytes(std::span(*buf));
  }
  void received(const disttrain::bound_op&) {}
  disttrain::grad_bucket<double> bucket_ready(const disttrain::schedule_op&) { return {}; }
  void bucket_reduced(const disttrain::schedule_op&) {}
};
static_assert(disttrain::exec_host<stage_host>);

}  // namespace

int main() {
  try {
    const auto sched = disttrain::add_communication(disttrain::make_1f1b(stages, microbatches));
    // Every message is one microbatch's `width` doubles.
    const disttrain::bound_world programs = disttrain::bind_schedule(
        sched,
        [](const disttrain::schedule_op&) -> std::int64_t { return width * sizeof(double); });
    disttrain::local_world world(stages, {std::chrono::milliseconds(5000)});
    std::vector<stage_host> hosts(stages);
    std::vector<disttrain::exec_stats> stats(stages);
    std::vector<std::exception_ptr> errors(stages);
    std::vector<std::thread> threads;
    for (int r = 0; r < stages; ++r)
      threads.emplace_back([&, r] {
        try {
          auto backend = world.endpoint(r);
          auto& h = hosts[static_cast<std::size_t>(r)];
          h.stage = sched.ranks[static_cast<std::size_t>(r)].stage;
          h.w = weight_of(h.stage);
          disttrain::executor<disttrain::local_backend> exec(backend);
          stats[static_cast<std::size_t>(r)] =
              exec.run(programs.programs[static_cast<std::size_t>(r)], h);
        } catch (...) {
          errors[static_cast<std::size_t>(r)] = std::current_exception();
        }
      });
    for (auto& t : threads) t.join();
    for (const auto& e : errors)
      if (e) std::rethrow_exception(e);

    // The serial reference: the same model, microbatch after microbatch.
    std::vector<double> serial(stages, 0.0);
    for (int mb = 0; mb < microbatches; ++mb) {
      std::vector<std::vector<double>> acts(stages + 1, std::vector<double>(width));
      for (int i = 0; i < width; ++i) acts[0][static_cast<std::size_t>(i)] = input(mb, i);
      for (int s = 0; s < stages; ++s)
        for (int i = 0; i < width; ++i)
          acts[static_cast<std::size_t>(s + 1)][static_cast<std::size_t>(i)] =
              weight_of(s) * acts[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
      std::vector<double> g(width, 1.0);
      for (int s = stages - 1; s >= 0; --s)
        for (int i = 0; i < width; ++i) {
          auto& gi = g[static_cast<std::size_t>(i)];
          serial[static_cast<std::size_t>(s)] +=
              gi * acts[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
          gi *= weight_of(s);
        }
    }
    double worst = 0;
    std::printf("stage  dL/dw pipelined   dL/dw serial   sent  exposed wait\n");
    for (int r = 0; r < stages; ++r) {
      const auto& h = hosts[static_cast<std::size_t>(r)];
      const double ref = serial[static_cast<std::size_t>(h.stage)];
      worst = std::max(worst, std::abs(h.grad - ref) / std::abs(ref));
      std::printf("%5d %16.9f %14.9f %6lld %10.3f ms\n", h.stage, h.grad, ref,
                  static_cast<long long>(stats[static_cast<std::size_t>(r)].messages_sent),
                  1e3 * stats[static_cast<std::size_t>(r)].exposed_comm_seconds);
    }
    std::printf("largest relative difference: %.3g\n", worst);
    return worst <= 1e-12 ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
