#pragma once
// Fault-injection suite shared by the local-backend test (tests/comm) and the
// MPI test (tests/mpi): one trial runs a route (`route_transfer`) or an
// executor iteration (`executor`) on one rank through a `fault_backend`, and
// classifies the rank's outcome. The contract (docs/comm.md, "Failure
// contract"): every rank ends with the correct bytes or a `disttrain::error`
// within the timeout; wrong data handed back without an error ("silent") is
// a failure of the library.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "disttrain/comm/fault_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/schedule/bind_schedule.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain/schedule/validate.hpp"
#include "route_cases.hpp"

namespace disttrain::test {

// What one rank of one trial ended with.
enum class outcome : int { correct, error, silent, foreign };

struct rank_outcome {
  outcome what = outcome::correct;
  errc code = errc::internal;
  double seconds = 0.0;                        // from the trial's start to the error (or the end)
  std::string text;                            // the error's text (foreign: the exception's)
  std::array<int, fault_kind_count> faults{};  // faults this rank injected, per kind
};

// Counts over many trials and ranks (summed over ranks: plain ints, so an
// MPI test can reduce them with one MPI_Allreduce).
struct tally {
  std::array<int, fault_kind_count> faults{};
  std::array<int, 4> outcomes{};         // per `outcome`
  std::array<int, 16> errors_by_code{};  // per errc, for error outcomes
  int trials = 0;
  int trials_with_faults = 0;
  int clean_trials = 0;          // no fault injected anywhere
  int clean_trials_correct = 0;  // ... and every rank correct
  int late_errors = 0;           // errors later than the allowed time
  double max_error_seconds = 0.0;

  [[nodiscard]] int total_faults() const {
    int n = 0;
    for (int f : faults) n += f;
    return n;
  }
  // Adds one trial (every rank's outcome); `allowed` is the latest an error may come.
  void add_trial(std::span<const rank_outcome> ranks, double allowed) {
    ++trials;
    int trial_faults = 0;
    bool all_correct = true;
    for (const auto& r : ranks) {
      for (int k = 0; k < fault_kind_count; ++k) {
        faults[static_cast<std::size_t>(k)] += r.faults[static_cast<std::size_t>(k)];
        trial_faults += r.faults[static_cast<std::size_t>(k)];
      }
      ++outcomes[static_cast<std::size_t>(r.what)];
      all_correct = all_correct && r.what == outcome::correct;
      if (r.what == outcome::error) {
        ++errors_by_code[static_cast<std::size_t>(r.code) % errors_by_code.size()];
        max_error_seconds = std::max(max_error_seconds, r.seconds);
        if (r.seconds > allowed) ++late_errors;
      }
    }
    if (trial_faults > 0) {
      ++trials_with_faults;
    } else {
      ++clean_trials;
      clean_trials_correct += all_correct ? 1 : 0;
    }
  }
  // A human-readable report (one paragraph).
  [[nodiscard]] std::string report(const std::string& title) const {
    std::string s = title + ": " + std::to_string(trials) + " trials (" +
                    std::to_string(trials_with_faults) + " with faults), " +
                    std::to_string(total_faults()) + " faults injected:";
    for (int k = 0; k < fault_kind_count; ++k)
      s += std::string(" ") + to_string(static_cast<fault_kind>(k)) + " " +
           std::to_string(faults[static_cast<std::size_t>(k)]);
    s += "\n  rank outcomes: correct bytes " + std::to_string(outcomes[0]) + ", error " +
         std::to_string(outcomes[1]) + " (";
    for (std::size_t c = 0; c < errors_by_code.size(); ++c)
      if (errors_by_code[c] > 0)
        s += std::string(to_string(static_cast<errc>(c))) + " " +
             std::to_string(errors_by_code[c]) + " ";
    s += "), SILENT WRONG DATA " + std::to_string(outcomes[2]) + ", foreign exceptions " +
         std::to_string(outcomes[3]) + "\n  latest error after " +
         std::to_string(max_error_seconds) + " s (" + std::to_string(late_errors) +
         " too late); fault-free trials all-correct " + std::to_string(clean_trials_correct) +
         " of " + std::to_string(clean_trials);
    return s;
  }
};

// The fault options of trial `seed`: `rate` per send, except that every
// tenth trial runs without faults (the control: those must all succeed);
// `corrupt` only where something checks the payload (verify's checksum).
inline fault_options trial_faults(std::uint64_t seed, double rate, bool allow_corrupt,
                                  std::chrono::milliseconds timeout) {
  fault_options o;
  o.seed = seed;
  o.rate = seed % 10 == 0 ? 0.0 : rate;
  o.max_delay = timeout;  // delays up to the whole timeout: some complete late, some in time
  o.kinds = {fault_kind::delay, fault_kind::drop, fault_kind::duplicate, fault_kind::truncate,
             fault_kind::kill};
  if (allow_corrupt) o.kinds.push_back(fault_kind::corrupt);
  return o;
}

// Runs `body` and classifies its end: a `disttrain::error` is `error`, any
// other exception `foreign`; else `check()` tells correct from silent.
template <class Body, class Check>
rank_outcome classify(std::chrono::steady_clock::time_point t0, Body&& body, Check&& check) {
  rank_outcome r;
  try {
    body();
    r.what = check() ? outcome::correct : outcome::silent;
  } catch (const error& e) {
    r.what = outcome::error;
    r.code = e.code();
    r.text = e.what();
  } catch (const std::exception& e) {
    r.what = outcome::foreign;
    r.text = e.what();
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

template <class B>
void count_faults(rank_outcome& r, const fault_backend<B>& fb) {
  for (const auto& f : fb.faults()) ++r.faults[static_cast<std::size_t>(f.kind)];
}

// One rank's part of a route trial over `fb`.
template <class B>
rank_outcome route_trial(fault_backend<B>& fb, const route_case& c, bool verify, int tag,
                         std::chrono::milliseconds timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const route_plan plan = plan_route(c.layout, c.from, c.pa, c.to, c.pb, c.shape, c.opts);
  auto bufs = make_buffers(c, fb.rank());
  buffer_pool pool;
  rank_outcome r = classify(
      t0,
      [&] {
        run_route(fb, plan, bufs.source, bufs.destination, pool,
                  {.tag = tag, .verify = verify, .timeout = timeout});
      },
      [&] { return count_mismatches(c, fb.rank(), bufs) == 0; });
  count_faults(r, fb);
  return r;
}

// ---- executor trials -------------------------------------------------------

// The schedule of the executor trials: an encoder (1 stage, `enc_dp`
// replicas) feeding a backbone of `bb_stages` stages, with communication and
// gradient sync (the encoder replicas reduce a bucket).
inline pipeline_schedule fault_schedule(int enc_dp, int bb_stages, int microbatches) {
  multi_module_spec spec;
  spec.segments = {{.name = "enc", .role = disttrain::module_role::encoder, .pp = 1, .dp = enc_dp},
                   {.name = "bb", .pp = bb_stages}};
  spec.num_microbatches = microbatches;
  auto s = add_grad_sync(add_communication(make_multi_module(spec)));
  validate_schedule(s);
  return s;
}

// A host whose messages carry values determined by the op (both sides know
// them); every receive is checked on arrival, the reduced bucket at the end.
// A mismatch is recorded, never thrown: the suite must see silent corruption.
struct checking_host {
  using grad_type = double;
  const pipeline_schedule* s = nullptr;
  int me = 0;
  std::vector<int> group;                                  // its program's dp_group
  std::map<std::array<int, 3>, std::vector<double>> bufs;  // (grad?, send?, microbatch)
  std::vector<double> bucket;
  int wrong = 0;  // received or reduced values that differ from the expectation
  int received_ops = 0;
  bool reduced = false;

  static double value(const schedule_op& op, std::size_t i) {
    const std::uint64_t k = (static_cast<std::uint64_t>(is_grad(op)) << 60) ^
                            (static_cast<std::uint64_t>(op.stage) << 40) ^
                            (static_cast<std::uint64_t>(op.microbatch) << 20) ^ i;
    return static_cast<double>(splitmix64::mix(k) >> 11);
  }
  static bool is_grad(const schedule_op& op) {
    return op.kind == op_kind::send_grad || op.kind == op_kind::recv_grad;
  }
  static std::size_t len(int mb) { return static_cast<std::size_t>(3 * mb + 5); }
  static double contribution(int rank, std::size_t i) {
    return static_cast<double>((rank + 1) * 1000 + static_cast<int>(i));
  }

  void forward(const schedule_op&) {}
  void backward(const schedule_op&) {}
  void weight(const schedule_op&) {}
  void optimizer_step(const schedule_op&) {}
  static std::int64_t bytes(const schedule_op& op) {
    return static_cast<std::int64_t>(len(op.microbatch) * sizeof(double));
  }
  std::span<std::byte> payload(const bound_op& m) {
    const schedule_op& op = m.op;
    auto& b = bufs[{is_grad(op) ? 1 : 0, is_send(op.kind) ? 1 : 0, op.microbatch}];
    b.assign(len(op.microbatch), 0.0);
    if (is_send(op.kind))
      for (std::size_t i = 0; i < b.size(); ++i) b[i] = value(op, i);
    return std::as_writable_bytes(std::span(b));
  }
  void received(const bound_op& m) {
    const schedule_op& op = m.op;
    ++received_ops;
    const auto& b = bufs.at({is_grad(op) ? 1 : 0, 0, op.microbatch});
    for (std::size_t i = 0; i < b.size(); ++i) wrong += b[i] != value(op, i) ? 1 : 0;
  }
  grad_bucket<double> bucket_ready(const schedule_op&) {
    bucket.resize(4);
    for (std::size_t i = 0; i < bucket.size(); ++i) bucket[i] = contribution(me, i);
    return {std::span(bucket)};
  }
  void bucket_reduced(const schedule_op&) {
    reduced = true;
    for (std::size_t i = 0; i < bucket.size(); ++i) {
      double want = 0.0;
      for (int r : group) want += contribution(r, i);
      wrong += bucket[i] != want ? 1 : 0;
    }
  }
  // Everything the program received was checked and right.
  [[nodiscard]] bool ok() const { return wrong == 0; }
};

// One rank's part of an executor trial over `fb`.
template <class B>
rank_outcome exec_trial(fault_backend<B>& fb, const pipeline_schedule& s,
                        std::chrono::milliseconds timeout) {
  const auto t0 = std::chrono::steady_clock::now();
  const bound_world w = bind_schedule(s, &checking_host::bytes);
  const bound_program& mine = w.programs[static_cast<std::size_t>(fb.rank())];
  checking_host h;
  h.s = &s;
  h.me = fb.rank();
  h.group = mine.dp_group;
  executor<fault_backend<B>> ex(fb, {.timeout = timeout});
  rank_outcome r = classify(
      t0, [&] { ex.run(mine, h); }, [&] { return h.ok(); });
  count_faults(r, fb);
  return r;
}

}  // namespace disttrain::test
