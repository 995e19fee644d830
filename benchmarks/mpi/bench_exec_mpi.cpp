// Executor benchmark on MPI: iteration time with communication/compute
// overlap on vs off, one process per pipeline stage, real MPI messages
// (disttrain::mpi_backend), on a synthetic GPipe / 1F1B workload whose
// communication time equals its compute time (ideal ratio on/off 0.5).
// The baseline (overlap off, the executor's naive mode) and the simulator's
// prediction for the same workload are measured in the same run.
//
//   mpirun --oversubscribe -np 4 bench_exec_mpi [--json] [--quick]
//   (registered as the smoke test mpi.bench_smoke.bench_exec_mpi.np4, --quick)
//
// Workload (stated, because the machine may have fewer cores than ranks):
// - compute ops are timed sleeps (a GPU kernel the host waits for), so ranks
//   do not compete for cores; while it "computes" the host thread drives MPI
//   progress (MPI_Iprobe every ~50 us), as a rank with a GPU would: single-
//   threaded MPI moves shared-memory data only inside MPI calls. Busy-wait
//   compute would make 4 ranks on 2 cores steal each other's time.
// - messages: the raw one-way time of MPI_Send/MPI_Recv between ranks 0 and 1
//   is measured first, for message sizes doubling from 64 KiB; the activation
//   message is the smallest size whose raw time reaches the target forward
//   time (capped at 16 MiB), the gradient message twice that, and F is set to
//   the activation message's measured time (B = 2F): per middle rank, link
//   time ~ compute time (see size_messages).
// - overlap off runs the executor's naive mode: every receive posted at its
//   op and waited at once, every send completed before the next op. Above
//   MPI's eager limit a send completes only when the receiver matched it, so
//   1F1B, where neighbours send to each other at the same time, deadlocks in
//   this mode: the executor's deadline turns that into errc::timeout (on the
//   rank that times out first; its peers stop at its abort notice), which
//   the benchmark reports ("deadlock") instead of a time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/exec/trace.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/gpipe.hpp"
#include "disttrain/schedule/one_f_one_b.hpp"
#include "disttrain/schedule/validate.hpp"
#include "disttrain/sim/simulator.hpp"
#include "exec_workload.hpp"
#include "harness.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

// Sleeps for `d` in slices, letting MPI progress outstanding transfers.
void compute_for(clock_type::duration d) {
  const auto until = clock_type::now() + d;
  for (auto now = clock_type::now(); now < until; now = clock_type::now()) {
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
    std::this_thread::sleep_for(std::min<clock_type::duration>(until - now, 50us));
  }
}

// Raw one-way seconds of a `bytes` message from rank 0 to rank 1
// (MPI_Send/MPI_Recv, median of `reps` round trips / 2).
double raw_one_way(int me, std::size_t bytes, int reps) {
  std::vector<char> buf(bytes);
  const int n = static_cast<int>(bytes);
  std::vector<double> t;
  for (int i = 0; i <= reps; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    if (me == 0) {
      MPI_Send(buf.data(), n, MPI_CHAR, 1, 7, MPI_COMM_WORLD);
      MPI_Recv(buf.data(), n, MPI_CHAR, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (me == 1) {
      MPI_Recv(buf.data(), n, MPI_CHAR, 0, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(buf.data(), n, MPI_CHAR, 0, 7, MPI_COMM_WORLD);
    }
    if (i > 0) t.push_back((MPI_Wtime() - t0) / 2);  // the first round trip warms up
  }
  double med = 0;
  if (me == 0) {
    std::sort(t.begin(), t.end());
    med = t[t.size() / 2];
  }
  MPI_Bcast(&med, 1, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  return med;
}

struct link_sizing {
  double forward_s = 0;   // the forward time F (raised to the link's floor, see size_messages)
  std::size_t bytes = 0;  // activation message
  double act_s = 0;       // raw one-way time of an activation message
  double grad_s = 0;      // ... of a gradient message (2x the bytes)
};

// The activation message: the smallest of 64 KiB, 128 KiB, ... 16 MiB whose
// raw one-way time reaches the target F (milliseconds, so timed sleeps stay
// accurate). F is then set to that message's measured time, so per rank
// compute (3F per microbatch) matches the raw link time (activation +
// gradient message) whether the link is bandwidth bound or latency bound (an
// oversubscribed machine: milliseconds of scheduling for any size). The cap
// keeps the buffers (6 message sizes per microbatch and rank, allocated in
// an untimed warm-up run) within memory.
link_sizing size_messages(int me, double target_forward_s, int reps) {
  link_sizing l;
  for (std::size_t b = std::size_t{1} << 16;; b *= 2) {
    const double t = raw_one_way(me, b, reps);
    l.bytes = b;
    l.act_s = t;
    if (t >= target_forward_s || b >= (std::size_t{1} << 24)) break;
  }
  l.forward_s = l.act_s;
  l.grad_s = raw_one_way(me, 2 * l.bytes, reps);
  return l;
}

// F and B = 2F as sleeps that keep MPI progressing (see exec_workload.hpp).
struct mpi_compute {
  void operator()(clock_type::duration d) const { compute_for(d); }
};
using sleep_host = disttrain::bench::synthetic_host<mpi_compute>;

struct mode_result {
  double seconds = 0;     // median over repetitions of the slowest rank's iteration
  bool deadlock = false;  // the naive mode timed out (see the file comment)
};

struct row {
  std::string schedule;
  mode_result on, off;
  double sim_on = 0, sim_off = 0;
};

mode_result run_mode(disttrain::mpi_backend& b, const disttrain::pipeline_schedule& s, bool overlap,
                     clock_type::duration forward, std::size_t bytes, int reps,
                     std::chrono::milliseconds timeout) {
  const int me = b.rank();
  std::vector<double> times;
  mode_result res;
  // One host for every repetition: its message buffers are allocated (and
  // their pages touched) in the untimed first run, not in the measured ones.
  sleep_host h{forward};
  const disttrain::bound_world w = disttrain::bench::synthetic_programs(s, bytes);
  disttrain::executor<disttrain::mpi_backend> ex(
      b, {.overlap = overlap, .timeout = timeout, .record = false});
  for (int rep = 0; rep <= reps && !res.deadlock; ++rep) {
    b.barrier();
    double t = 0;
    int failed = 0;
    try {
      t = ex.run(w.programs[static_cast<std::size_t>(me)], h).iteration_seconds;
    } catch (const disttrain::error& e) {
      // A timeout, or a peer's abort notice naming one (exec/executor.hpp, "Failures").
      const bool notice = e.code() == disttrain::errc::comm_error &&
                          e.message().find("error (timeout;") != std::string::npos;
      if (e.code() != disttrain::errc::timeout && !notice) throw;
      failed = 1;
    }
    // Every rank learns whether any rank timed out, and the slowest time.
    int any_failed = 0;
    MPI_Allreduce(&failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    double slowest = 0;
    MPI_Allreduce(&t, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (any_failed) {
      res.deadlock = true;
      // Unmatched sends and receives of the abandoned iteration: a fresh
      // communicator for what follows (the caller rebuilds the backend).
      break;
    }
    if (rep > 0) times.push_back(slowest);  // run 0 warms up
  }
  if (!times.empty()) {
    std::sort(times.begin(), times.end());
    res.seconds = times[times.size() / 2];
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  const auto opts = disttrain::bench::parse_options(argc, argv);
  int me = 0, p = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &p);
  if (p < 2) {
    if (me == 0)
      std::fprintf(stderr, "bench_exec_mpi needs at least 2 ranks (one per pipeline stage)\n");
    return 2;
  }
  const int microbatches = opts.quick ? 4 : 8, reps = opts.quick ? 1 : 3;
  const auto forward = opts.quick ? 1ms : 4ms;
  const link_sizing link =
      size_messages(me, std::chrono::duration<double>(forward).count(), opts.quick ? 3 : 9);
  const double forward_s = link.forward_s;
  const auto forward_time =
      std::chrono::duration_cast<clock_type::duration>(std::chrono::duration<double>(forward_s));
  // Deadline of the naive mode's waits (how long before a stuck run counts as
  // deadlocked): ~4x the serial iteration plus 2 s. The overlapping mode
  // cannot deadlock, so it gets a generous 10x that (a loaded machine only
  // makes it slow).
  const auto naive_timeout = std::chrono::milliseconds(
      static_cast<long>(1e3 * 4.0 * microbatches * (3.0 * forward_s + link.act_s + link.grad_s)) +
      2000);

  std::vector<row> rows;
  for (const char* name : {"gpipe", "1f1b"}) {
    const auto compute_only = std::string(name) == "gpipe" ? disttrain::make_gpipe(p, microbatches)
                                                           : disttrain::make_1f1b(p, microbatches);
    const auto s = disttrain::add_grad_sync(disttrain::add_communication(compute_only));
    disttrain::validate_schedule(s);
    row r;
    r.schedule = name;
    // The simulator's view: F, B = 2F, each message taking its measured raw
    // time on its link.
    const disttrain::bench::synthetic_durations d{forward_s, link.act_s, link.grad_s};
    r.sim_on = disttrain::simulate(s, d).iteration_time;
    r.sim_off = disttrain::simulate(s, d, {.overlap_comm = false}).iteration_time;
    for (bool overlap : {true, false}) {
      // A backend per mode: a deadlocked naive run leaves unmatched requests behind.
      const auto timeout = overlap ? 10 * naive_timeout : naive_timeout;
      disttrain::mpi_backend b(MPI_COMM_WORLD, {timeout});
      (overlap ? r.on : r.off) = run_mode(b, s, overlap, forward_time, link.bytes, reps, timeout);
    }
    rows.push_back(r);
  }

  if (me == 0) {
    const double compute_ms = 3.0 * forward_s * microbatches * 1e3;
    const double link_ms = (link.act_s + link.grad_s) * microbatches * 1e3;
    const auto ms = [](const mode_result& m) {
      return m.deadlock ? nlohmann::json() : nlohmann::json(m.seconds * 1e3);
    };
    const auto ratio = [](const row& x) {
      return x.on.deadlock || x.off.deadlock ? nlohmann::json()
                                             : nlohmann::json(x.on.seconds / x.off.seconds);
    };
    if (opts.json) {
      nlohmann::json ov = nlohmann::json::array();
      for (const auto& x : rows)
        ov.push_back({{"schedule", x.schedule},
                      {"stages", p},
                      {"microbatches", microbatches},
                      {"iteration_ms_overlap_on", ms(x.on)},
                      {"iteration_ms_overlap_off", ms(x.off)},
                      {"overlap_off_deadlock", x.off.deadlock},
                      {"ratio_on_over_off", ratio(x)},
                      {"simulated_ms_on", x.sim_on * 1e3},
                      {"simulated_ms_off", x.sim_off * 1e3},
                      {"simulated_ratio", x.sim_on / x.sim_off},
                      {"ideal_ratio", 0.5}});
      nlohmann::json j{{"benchmark", "exec_mpi"},
                       {"backend", "mpi"},
                       {"ranks", p},
                       {"forward_ms", forward_s * 1e3},
                       {"activation_message_bytes", link.bytes},
                       {"raw_activation_ms", link.act_s * 1e3},
                       {"raw_gradient_ms", link.grad_s * 1e3},
                       {"compute_ms_per_rank", compute_ms},
                       {"raw_link_ms_per_rank", link_ms},
                       {"overlap", std::move(ov)}};
      fmt::print("{}\n", j.dump(2));
    } else {
      fmt::print(
          "overlap on MPI: {} ranks = stages, {} microbatches, F {:.1f} ms, B 2F (sleep + MPI "
          "progress)\n",
          p, microbatches, forward_s * 1e3);
      fmt::print(
          "  messages: activation {} KiB (raw one-way {:.2f} ms), gradient {} KiB ({:.2f} ms); per "
          "rank "
          "compute {:.1f} ms, raw link {:.1f} ms\n",
          link.bytes / 1024, link.act_s * 1e3, 2 * link.bytes / 1024, link.grad_s * 1e3, compute_ms,
          link_ms);
      fmt::print("  {:8s} {:>10s} {:>10s} {:>8s} {:>6s} | simulated {:>8s} {:>8s} {:>8s}\n",
                 "schedule", "on (ms)", "off (ms)", "on/off", "ideal", "on", "off", "on/off");
      for (const auto& x : rows)
        fmt::print(
            "  {:8s} {:>10s} {:>10s} {:>8s} {:6.2f} |           {:8.2f} {:8.2f} {:8.3f}\n",
            x.schedule, fmt::format("{:.2f}", x.on.seconds * 1e3),
            x.off.deadlock ? std::string("deadlock") : fmt::format("{:.2f}", x.off.seconds * 1e3),
            x.on.deadlock || x.off.deadlock ? std::string("-")
                                            : fmt::format("{:.3f}", x.on.seconds / x.off.seconds),
            0.5, x.sim_on * 1e3, x.sim_off * 1e3, x.sim_on / x.sim_off);
    }
  }
  // Overlap on never deadlocks (every receive is posted at the start).
  for (const auto& x : rows)
    if (x.on.deadlock) return 1;
  return 0;
}
