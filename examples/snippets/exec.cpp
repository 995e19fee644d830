// The examples of the exec part (disttrain/exec/*.hpp): see snippets.hpp.
// cuda_streams.hpp's example needs CUDA and stays in the header.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <thread>
#include <vector>

#include "disttrain/comm/local_backend.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/exec/trace.hpp"
#include "disttrain/schedule.hpp"
#include "disttrain/schedule/json.hpp"
#include "local_ranks.hpp"
#include "small_world.hpp"
#include "snippets.hpp"

namespace {

using namespace std::chrono_literals;
using disttrain::op_kind;
using disttrain::schedule_op;
using snippets::check;

using snippets::run_ranks;

// An encoder (DP 2) and a 2-stage backbone, 4 microbatches, with
// communication and gradient sync: 4 ranks.
disttrain::pipeline_schedule two_module_schedule() {
  disttrain::multi_module_spec spec;
  spec.segments = {{.name = "enc", .role = disttrain::module_role::encoder, .pp = 1, .dp = 2},
                   {.name = "bb", .pp = 2}};
  spec.num_microbatches = 4;
  return disttrain::add_grad_sync(disttrain::add_communication(disttrain::make_multi_module(spec)));
}

// An exec_host for a schedule: microbatch j carries j + 1 floats; F and B
// pass them on; one gradient bucket per rank, reduced over the rank's stage.
struct schedule_host {
  using grad_type = float;
  std::map<int, std::vector<float>> in, out, gin, gout;
  std::vector<float> bucket = std::vector<float>(1, 0.0f);
  int steps = 0;

  static std::size_t len(int mb) { return static_cast<std::size_t>(mb + 1); }
  // The bytes of a point-to-point op (bind_schedule's sizes).
  static std::int64_t bytes(const schedule_op& op) {
    return static_cast<std::int64_t>(len(op.microbatch) * sizeof(float));
  }
  void forward(const schedule_op& op) {
    auto it = in.find(op.microbatch);
    out[op.microbatch] = it != in.end() ? it->second : std::vector<float>(len(op.microbatch), 1.0f);
  }
  void backward(const schedule_op& op) {
    auto it = gin.find(op.microbatch);
    gout[op.microbatch] =
        it != gin.end() ? it->second : std::vector<float>(len(op.microbatch), 1.0f);
    bucket[0] += 1.0f;
  }
  void weight(const schedule_op&) {}
  void optimizer_step(const schedule_op&) { ++steps; }
  std::span<std::byte> payload(const disttrain::bound_op& b) {
    const schedule_op& op = b.op;
    std::vector<float>* buf = nullptr;
    switch (op.kind) {
      case op_kind::send_act: buf = &out.at(op.microbatch); break;
      case op_kind::send_grad: buf = &gout.at(op.microbatch); break;
      case op_kind::recv_act:
        buf = &(in[op.microbatch] = std::vector<float>(len(op.microbatch)));
        break;
      default: buf = &(gin[op.microbatch] = std::vector<float>(len(op.microbatch))); break;
    }
    return std::as_writable_bytes(std::span(*buf));
  }
  void received(const disttrain::bound_op&) {}
  disttrain::grad_bucket<float> bucket_ready(const schedule_op&) { return {std::span(bucket)}; }
  void bucket_reduced(const schedule_op&) {}
};
static_assert(disttrain::exec_host<schedule_host>);

void bucket_allreduce() {
  std::vector<double> sums(2);
  run_ranks(2, [&](disttrain::local_backend& backend) {
    std::vector<double> grads{1.0 + backend.rank(), 10.0};
    const std::vector<int> group{0, 1};
    const int tag = 5;
    //! [bucket_allreduce]
    disttrain::bucket_allreduce<disttrain::local_backend, double> ar;
    ar.start(backend, grads, group, tag);  // right after the bucket's last backward
    // ... more backward work ...
    ar.finish(backend);  // before the optimizer step: grads = sum over group
    //! [bucket_allreduce]
    sums[static_cast<std::size_t>(backend.rank())] = grads[0] + grads[1];
  });
  check(sums[0] == 1 + 2 + 20 && sums[1] == sums[0], "both replicas hold the sum");
}

void executor_file() {
  const auto sched = two_module_schedule();
  std::vector<int> steps(4);
  run_ranks(4, [&](disttrain::local_backend& backend) {
    const auto my_schedule_rank = static_cast<std::size_t>(backend.rank());
    schedule_host host;
    //! [executor_file]
    // A schedule's programs, one backend rank per schedule rank, each message
    // sized by the host (a plan's topology: bind_rank, below).
    disttrain::bound_world w = disttrain::bind_schedule(sched, &schedule_host::bytes);
    disttrain::executor<disttrain::local_backend> exec(backend);
    disttrain::exec_stats st = exec.run(w.programs[my_schedule_rank], host);
    // st.exposed_comm_seconds: time this rank waited for data
    //! [executor_file]
    check(st.exposed_comm_seconds >= 0 && st.messages_sent > 0, "messages sent");
    steps[my_schedule_rank] = host.steps;
  });
  check(steps == std::vector<int>(4, 1), "every rank ran its optimizer step");
}

void executor_bound() {
  const snippets::small_world sw;
  const auto& topo = sw.topo;
  const auto& chain = sw.chain;
  const auto& map = sw.map;
  const auto& shapes = sw.shapes;
  std::vector<int> forwards(5);
  run_ranks(5, [&](disttrain::local_backend& backend) {
    // The host's buffers, sized from the same bound rank (they keep its routes).
    const auto prepared = disttrain::bind_rank(topo, chain, map, shapes, backend.rank());
    snippets::bound_host host;
    host.buf.reset(prepared);
    //! [executor_bound]
    disttrain::executor<disttrain::local_backend> exec(backend);
    disttrain::bound_rank mine = disttrain::bind_rank(topo, chain, map, shapes, backend.rank());
    exec.run(mine.program, host);  // host: a exec_host
    //! [executor_bound]
    forwards[static_cast<std::size_t>(backend.rank())] = host.forwards;
  });
  check(forwards == std::vector<int>(5, 4), "every rank ran 4 forwards");
}

void exec_options() {
  //! [exec_options]
  disttrain::exec_options o{.overlap = true, .recv_lookahead = 4};
  //! [exec_options]
  check(o.overlap && o.recv_lookahead == 4, "exec_options");
}

//! [host]
struct my_host {
  using grad_type = float;
  void forward(const disttrain::schedule_op& op);
  void backward(const disttrain::schedule_op& op);
  void weight(const disttrain::schedule_op& op);
  void optimizer_step(const disttrain::schedule_op& op);
  std::span<std::byte> payload(const disttrain::bound_op& b);  // b.bytes long
  void received(const disttrain::bound_op& b);
  disttrain::grad_bucket<float> bucket_ready(const disttrain::schedule_op& op);
  void bucket_reduced(const disttrain::schedule_op& op);
};
static_assert(disttrain::exec_host<my_host>);
//! [host]

void grad_bucket() {
  std::vector<double> grads(10);
  //! [grad_bucket]
  disttrain::grad_bucket<double> b{std::span(grads)};  // summed over the program's dp_group
  //! [grad_bucket]
  check(b.data.size() == 10, "grad_bucket");
}

void message_tags() {
  //! [message_tags]
  disttrain::message_tags tags(/*virtual stages*/ 4, /*microbatches*/ 8);
  int t = tags.p2p(/*produced at virtual stage*/ 1, /*gradient*/ false, /*microbatch*/ 3);
  // the activation of microbatch 3 that crosses link 1: its send and its receive
  //! [message_tags]
  check(t != tags.p2p(1, true, 3) && t != tags.p2p(2, false, 3) && t < tags.control(),
        "one tag per message of an iteration");
}

void timeline() {
  const auto sched = two_module_schedule();
  run_ranks(4, [&](disttrain::local_backend& backend) {
    schedule_host host;
    const disttrain::bound_world w = disttrain::bind_schedule(sched, &schedule_host::bytes);
    disttrain::executor<disttrain::local_backend> exec(backend);
    const auto& program = w.programs[static_cast<std::size_t>(backend.rank())];
    //! [timeline]
    disttrain::exec_stats st = exec.run(program, host);
    auto all = disttrain::gather_events(backend, st.events);  // every rank's events
    if (backend.rank() == 0)
      disttrain::write_json_file("iter.trace.json", disttrain::exec_trace_json(sched, all));
    //! [timeline]
    check(all.size() >= st.events.size(), "every rank's events");
  });
  const auto j = disttrain::read_json_file("iter.trace.json");
  std::filesystem::remove("iter.trace.json");
  check(j.contains("traceEvents") && !j["traceEvents"].empty(), "iter.trace.json");
}

void exec_event() {
  //! [exec_event]
  disttrain::exec_event e{disttrain::schedule_op::forward(0, 0, 2),
                          /*rank*/ 1,
                          /*index*/ 4,
                          0.010,
                          0.012,
                          disttrain::exec_track::compute};
  //! [exec_event]
  check(e.op.microbatch == 2 && e.rank == 1 && e.end > e.start, "exec_event");
}

}  // namespace

int main() {
  snippets::runner r("exec");
  r.run("bucket_allreduce", bucket_allreduce);
  r.run("executor_file", executor_file);
  r.run("executor_bound", executor_bound);
  r.run("exec_options", exec_options);
  r.run("grad_bucket", grad_bucket);
  r.run("message_tags", message_tags);
  r.run("timeline", timeline);
  r.run("exec_event", exec_event);
  return r.finish();
}
