// Issue 13 item 5 under mpirun: a rank that sends a large (rendezvous,
// 4 MiB) message to a rank whose route fails learns it from that rank's
// abort notice (route_transfer.hpp, "Fault propagation"), well before its
// own timeout, and the executor's peers of a failed rank likewise (last
// case). Each case uses a fresh backend: a failed route leaves the
// unreceived messages of its senders on the communicator. Run with 3 ranks
// (more ranks only wait at the barriers).
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "disttrain/comm/fault_backend.hpp"
#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/schedule/bind_schedule.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/one_f_one_b.hpp"
#include "mpi_harness.hpp"

using disttrain::errc;
using disttrain::mpi_backend;
using disttrain::mpitest::capture;
using disttrain::mpitest::contains;
using namespace std::chrono_literals;

namespace {

// The buffers of a failed transfer: MPI may still read a send it could not
// cancel (mpi_backend::sends_in_flight; docs/comm.md, "After a timeout") or
// write a receive it had matched, so they are never freed while it runs:
// they live until the process exits, after MPI_Finalize (mpi_session).
// (Freed at the end of each case, rank 1's 4 MiB send of the executor case,
// still in flight, made the next barrier read freed memory: a crash in CI.)
void keep_until_exit(std::vector<std::byte>&& b) {
  static std::vector<std::vector<std::byte>> kept;
  kept.push_back(std::move(b));  // the bytes stay where they are
}

// The receiver's start fails (a destination of the wrong size) before it
// posts a receive: rank 0's 4 MiB send to rank 1 (tag 7, timeout 10 s) is
// never matched. Rank 0 must fail with comm_error naming rank 1 within 5 s.
void receiver_fails_in_start() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  const int me = b.rank();
  if (me < 2) {
    const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                                 {"b", disttrain::module_role::backbone, 1, 1, 1}});
    const auto p = disttrain::sample_placement::round_robin(2, 1);
    const disttrain::activation_shape shape{{512, 512}, 1024, 4};
    const auto plan = disttrain::plan_boundary_route(L, 0, p, p, shape);
    std::vector<std::byte> src(static_cast<std::size_t>(plan.source_elements(me)) * 4);
    std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(me)) * 4 +
                               (me == 1 ? 4 : 0));
    disttrain::buffer_pool pool;
    // The sender starts first: its send is posted when the receiver fails.
    if (me == 1) MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = capture([&] {
      disttrain::route_transfer<mpi_backend> t(b, plan, pool, {.tag = 7});
      t.start(src, dst);
      if (me == 0) MPI_Barrier(MPI_COMM_WORLD);
      t.wait();
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (me == 0) {
      std::fprintf(stderr, "[rank 0] after %.3f s: %s\n", s, e.what());
      MPI_CHECK(e.code() == errc::comm_error);
      MPI_CHECK(e.where() == "rank 0 -> rank 1 tag 7");
      MPI_CHECK(
          contains(e.message(), "rank 1 aborted the route after its own error (invalid_argument)"));
      MPI_CHECK(contains(e.message(), "message of 4194304 bytes"));
      MPI_CHECK(contains(e.message(), "control tag 16391"));
      // What became of the send: cancelled, or kept by MPI with its buffer.
      MPI_CHECK(contains(e.message(), "this rank's send was withdrawn (cancelled") ||
                contains(e.message(), "MPI cannot cancel it"));
      MPI_CHECK(s < 5.0);  // not its 10 s timeout
    } else {
      MPI_CHECK(e.code() == errc::invalid_argument);
      MPI_CHECK(contains(e.message(), "destination buffer has"));
    }
    keep_until_exit(std::move(src));
    keep_until_exit(std::move(dst));
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// The receiver's wait fails: ranks 0 and 1 each send rank 2 their samples
// (DP 2 -> DP 1, 2 MiB each), but rank 2 planned with another sample order
// (same sizes: "plan disagreement"). Rank 0's message comes first: rank 2
// fails on it and takes it in (rank 0 completes), but not rank 1's, which
// posts each of its sends 1 s late (fault_backend delay): rank 1 must learn
// of rank 2's failure from its abort notice, not from its own 10 s timeout.
void receiver_fails_in_wait() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  const int me = b.rank();
  MPI_Barrier(MPI_COMM_WORLD);
  if (me < 3) {
    const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 2},
                                 {"b", disttrain::module_role::backbone, 1, 1, 1}});
    const auto pa = disttrain::sample_placement::round_robin(4, 2);
    const auto pb = disttrain::sample_placement::round_robin(4, 1);
    const disttrain::sample_placement swapped({{1, 0, 3, 2}});
    const disttrain::activation_shape shape{{256, 256, 256, 256}, 1024, 4};
    const auto plan = disttrain::plan_boundary_route(L, 0, pa, me == 2 ? swapped : pb, shape);
    std::vector<std::byte> src(static_cast<std::size_t>(plan.source_elements(me)) * 4);
    std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(me)) * 4);
    disttrain::buffer_pool pool;
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = capture([&] {
      if (me == 1) {
        disttrain::fault_backend<mpi_backend> slow(b, {.rate = 1.0,
                                                       .kinds = {disttrain::fault_kind::delay},
                                                       .min_delay = 1000ms,
                                                       .max_delay = 1000ms});
        disttrain::run_route(slow, plan, src, dst, pool, {.tag = 7});
      } else {
        disttrain::run_route(b, plan, src, dst, pool, {.tag = 7});
      }
    });
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (me == 1) {
      std::fprintf(stderr, "[rank 1] after %.3f s: %s\n", s, e.what());
      MPI_CHECK(e.code() == errc::comm_error);
      MPI_CHECK(e.where() == "rank 1 -> rank 2 tag 7");
      MPI_CHECK(contains(e.message(), "rank 2 aborted the route after its own error (comm_error)"));
      MPI_CHECK(contains(e.message(), "control tag 16391"));
      MPI_CHECK(s < 5.0);  // its sends took 2 s to post; not its 10 s timeout
    } else if (me == 2) {
      MPI_CHECK(e.code() == errc::comm_error);
      MPI_CHECK(contains(e.message(), "plan disagreement"));
    }
    keep_until_exit(std::move(src));
    keep_until_exit(std::move(dst));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

// A 3-stage 1F1B schedule program (4 microbatches of 4 MiB activations and
// gradients: rendezvous messages) whose middle rank's host throws at its
// second forward: ranks 0 and 2 wait for it (a gradient, an activation) and
// must fail with comm_error naming it from its abort notice, within 5 s of a
// 10 s timeout (exec/executor.hpp, "Failures"). Without notices both waited
// 10 s.
struct mpi_exec_host {
  using grad_type = float;
  int me = 0;
  int forwards = 0;
  std::vector<std::vector<std::byte>> bufs;  // one per message, alive for the run
  std::vector<float> bucket{0.0f};
  void forward(const disttrain::schedule_op&) {
    if (me == 1 && forwards++ == 1)
      disttrain::fail(errc::invalid_argument, "host", "injected failure");
  }
  void backward(const disttrain::schedule_op&) {}
  void weight(const disttrain::schedule_op&) {}
  void optimizer_step(const disttrain::schedule_op&) {}
  disttrain::grad_bucket<float> bucket_ready(const disttrain::schedule_op&) {
    return {std::span(bucket)};
  }
  void bucket_reduced(const disttrain::schedule_op&) {}
  std::span<std::byte> payload(const disttrain::bound_op& op) {
    return bufs.emplace_back(static_cast<std::size_t>(op.bytes));
  }
  void received(const disttrain::bound_op&) {}
};

void executor_rank_fails() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  const int me = b.rank();
  if (me < 3) {
    const auto s = disttrain::add_communication(disttrain::make_1f1b(3, 4));
    const auto w = disttrain::bind_schedule(
        s, [](const disttrain::schedule_op&) { return std::int64_t{4} << 20; });
    mpi_exec_host h;
    h.me = me;
    h.bufs.reserve(64);
    disttrain::executor<mpi_backend> ex(b);
    const auto t0 = std::chrono::steady_clock::now();
    const auto e = capture([&] { ex.run(w.programs[static_cast<std::size_t>(me)], h); });
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "[rank %d] after %.3f s: %s\n", me, sec, e.what());
    if (me == 1) {
      MPI_CHECK(e.code() == errc::invalid_argument);
      MPI_CHECK(contains(e.message(), "injected failure"));
    } else {
      MPI_CHECK(e.code() == errc::comm_error);
      MPI_CHECK(contains(e.message(),
                         "rank 1 aborted the iteration after its own error (invalid_argument"));
      MPI_CHECK(sec < 5.0);  // not its 10 s timeout
    }
    for (std::vector<std::byte>& buf : h.bufs) keep_until_exit(std::move(buf));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  if (int rc = disttrain::mpitest::skip_unless_ranks(3, "test_mpi_notices")) return rc;
  return disttrain::mpitest::run_all(
      {{"receiver fails in start: its sender gets its abort notice", receiver_fails_in_start},
       {"receiver fails in wait: its sender gets its abort notice", receiver_fails_in_wait},
       {"executor: a failed rank's peers get its abort notice", executor_rank_fails}});
}
