#pragma once
/// @file driver.hpp
/// @brief Command line and training loop shared by the disaggregated-training
/// examples (threads as ranks, or MPI processes): lays the model out with the
/// planner (or a hand layout), prints the loss per iteration, the time, the
/// exposed communication and data wait, writes a Perfetto trace of the last
/// iteration, and optionally checks the first iteration's gradients against
/// the single-process reference.

#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "disttrain/exec/trace.hpp"
#include "disttrain/plan/format.hpp"

#include "dist_trainer.hpp"
#include "planned.hpp"
#include "serial.hpp"

namespace tiny_mllm {

/// @brief Everything the examples accept on the command line.
struct driver_options {
  config model;
  dist_plan plan;
  bool hand_layout = false;       ///< a layout flag was given: use `plan` as is, no planner
  bool microbatches_set = false;  ///< --microbatches given: overrides the planner's count
  int ranks = 7;                  ///< ranks to plan for (threads example; MPI plans for its world)
  int min_bb_pp = 2;              ///< planner: fewest backbone stages (see resolve_plan)
  int iterations = 8;
  std::string trace = "disaggregated_training.trace.json";  ///< empty: no trace
  bool check = false;   ///< compare iteration 0's gradients with the serial run; exit 1 if off
  bool overlap = true;  ///< executor overlap (false: naive baseline)
  bool quiet = false;
};

/// @brief Parses `--name value` options; exits with usage on `--help` or an error.
inline driver_options parse_driver_options(int argc, char** argv) {
  driver_options o;
  const auto usage = [&](int code) {
    std::printf(
        "usage: %s [--iterations N] [--ranks N] [--min-bb-pp N]\n"
        "          [--enc-dp N] [--bb-pp N] [--bb-dp N] [--gen-dp N]   (any of these: hand layout, "
        "no planner)\n"
        "          [--microbatches N] [--batch N] [--buckets N] [--split-backward] [--no-overlap]\n"
        "          [--trace FILE | --no-trace] [--check] [--quiet]\n"
        "  Without a layout flag the planner lays the model out on the ranks (--ranks N threads, "
        "or the\n"
        "  MPI world), with at least --min-bb-pp backbone stages (default 2).\n",
        argv[0]);
    std::exit(code);
  };
  for (int i = 1; i < argc; ++i) {
    const std::string_view a(argv[i]);
    const auto next_int = [&]() -> int {
      if (i + 1 >= argc) usage(2);
      return std::atoi(argv[++i]);
    };
    if (a == "--help" || a == "-h")
      usage(0);
    else if (a == "--iterations")
      o.iterations = next_int();
    else if (a == "--ranks")
      o.ranks = next_int();
    else if (a == "--min-bb-pp")
      o.min_bb_pp = next_int();
    else if (a == "--enc-dp") {
      o.plan.enc_dp = next_int();
      o.hand_layout = true;
    } else if (a == "--bb-pp") {
      o.plan.bb_pp = next_int();
      o.hand_layout = true;
    } else if (a == "--bb-dp") {
      o.plan.bb_dp = next_int();
      o.hand_layout = true;
    } else if (a == "--gen-dp") {
      o.plan.gen_dp = next_int();
      o.hand_layout = true;
    } else if (a == "--microbatches") {
      o.plan.microbatches = next_int();
      o.microbatches_set = true;
    } else if (a == "--batch")
      o.plan.batch_size = next_int();
    else if (a == "--buckets")
      o.plan.buckets = next_int();
    else if (a == "--split-backward")
      o.plan.split_backward = true;
    else if (a == "--no-overlap")
      o.overlap = false;
    else if (a == "--trace") {
      if (i + 1 >= argc) usage(2);
      o.trace = argv[++i];
    } else if (a == "--no-trace")
      o.trace.clear();
    else if (a == "--check")
      o.check = true;
    else if (a == "--quiet")
      o.quiet = true;
    else {
      std::fprintf(stderr, "unknown argument: %s\n", argv[i]);
      usage(2);
    }
  }
  return o;
}

/// @brief The layout to train with and how it was chosen.
struct resolved_plan {
  dist_plan plan;
  std::string
      description;  ///< printable: the planner's plan and its modelled time, or "hand layout"
};

/// @brief The hand layout of `o`, or the planner's layout of the tiny model on
/// `ranks` ranks (`plan_layout`, `to_dist_plan`): the same on every rank (the
/// planner is deterministic). The planner's own choice for this model has one
/// backbone stage (data parallelism beats pipelining when neither the
/// gradient sync nor memory binds, see docs/exec.md); `o.min_bb_pp` (default
/// 2) asks it for the best layout with at least that many stages, so the
/// example exercises pipelining. `--microbatches` overrides its microbatch count.
inline resolved_plan resolve_plan(const driver_options& o, int ranks) {
  if (o.hand_layout) return {o.plan, "hand layout (no planner)"};
  const auto pr = plan_layout(o.model, ranks, o.plan.batch_size, 1e9, o.min_bb_pp);
  resolved_plan r{to_dist_plan(pr.plan, o.model, o.plan), ""};
  if (o.microbatches_set) r.plan.microbatches = o.plan.microbatches;
  r.description = fmt::format(
      "planner's layout for {} ranks (TP 1, at least {} backbone stages; modelled "
      "iteration {:.3f} ms, search {:.1f} ms):\n{}",
      ranks, o.min_bb_pp, pr.evaluation.iteration_time_s * 1e3, pr.solve_ms,
      disttrain::format_plan(pr.plan));
  return r;
}

/// @brief Trains on this rank; returns the process exit code (every rank
/// returns the same). Collective: every rank of the world calls it.
/// `o.plan` is the layout to run (see `resolve_plan`).
template <disttrain::comm_backend B>
int train(B& backend, const driver_options& o) {
  trainer_options topts;
  topts.exec.overlap = o.overlap;
  rank_trainer<B> t(backend, o.model, o.plan, topts);
  const bool root = backend.rank() == 0;
  if (root && !o.quiet)
    fmt::print(
        "disaggregated plan: encoder DP {}, backbone PP {} x DP {} (layers {}), generator DP {} "
        "({} ranks); "
        "{} samples in {} microbatches per iteration\n",
        o.plan.enc_dp, o.plan.bb_pp, o.plan.bb_dp,
        o.plan.bb_layers.empty() ? std::string("even") : disttrain::format_layers(o.plan.bb_layers),
        o.plan.gen_dp, o.plan.world_size(), o.plan.batch_size, o.plan.microbatches);
  int status = 0;
  for (int k = 0; k < o.iterations; ++k) {
    step_result r = t.step(static_cast<std::uint64_t>(k), k + 1 < o.iterations);
    // Per-iteration figures: the slowest rank's time, the worst exposed waits.
    double fig[3] = {r.exec.iteration_seconds, r.exec.exposed_comm_seconds, r.data_wait_seconds};
    std::vector<double> all(3 * static_cast<std::size_t>(backend.size()));
    backend.allgather(std::as_bytes(std::span(fig)), std::as_writable_bytes(std::span(all)));
    double worst[3] = {0, 0, 0};
    for (std::size_t i = 0; i < all.size(); ++i) worst[i % 3] = std::max(worst[i % 3], all[i]);
    if (root && !o.quiet)
      fmt::print(
          "iter {:3d}  loss {:8.5f}  time {:7.2f} ms  max exposed comm {:6.2f} ms  max data wait "
          "{:6.2f} ms\n",
          k, r.loss, worst[0] * 1e3, worst[1] * 1e3, worst[2] * 1e3);
    if (k == 0 && o.check) {
      serial_trainer ref(o.model, topts.optimizer);
      const double ref_loss = ref.compute_gradients(
          make_batch(o.model, 0, static_cast<std::size_t>(o.plan.batch_size)));
      const double mismatch = gradient_mismatch(t.last_gradients(), ref);
      double local[2] = {mismatch, std::abs(r.loss - ref_loss) / ref_loss};
      std::vector<double> every(2 * static_cast<std::size_t>(backend.size()));
      backend.allgather(std::as_bytes(std::span(local)), std::as_writable_bytes(std::span(every)));
      double worst_grad = 0, worst_loss = 0;
      for (std::size_t i = 0; i < every.size(); i += 2) {
        worst_grad = std::max(worst_grad, every[i]);
        worst_loss = std::max(worst_loss, every[i + 1]);
      }
      const bool ok = worst_grad <= 1e-12 && worst_loss <= 1e-12;
      if (root)
        fmt::print(
            "check: iteration 0 gradients vs the single-process run: max relative error {:.3g} "
            "(limit 1e-12), "
            "loss {:.3g} -> {}\n",
            worst_grad, worst_loss, ok ? "OK" : "MISMATCH");
      if (!ok) status = 1;
    }
    if (k + 1 == o.iterations && !o.trace.empty()) {
      const auto events = disttrain::gather_events(backend, r.exec.events);
      if (root) {
        const auto world = disttrain::as_schedule(t.last_world(), t.topology());
        disttrain::write_json_file(o.trace, disttrain::exec_trace_json(world, events), -1);
        if (!o.quiet)
          fmt::print("trace of the last iteration: {} ({} events; open in ui.perfetto.dev)\n",
                     o.trace, events.size());
      }
    }
  }
  return status;
}

}  // namespace tiny_mllm
