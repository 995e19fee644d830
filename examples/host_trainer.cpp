// A host trainer in one file: plan -> topology -> per-batch reorder -> bind ->
// execute, over MPI, with the tiny Eigen modules (examples/tiny_mllm). Each
// module has its own TP/PP/DP; every rank binds only its own program.
//
//   mpirun --oversubscribe -np 12 ./example_host_trainer_mpi --enc-tp 2 --enc-dp 2 --bb-tp 2
//       --bb-dp 3 --gen-dp 2 --check                                 # (one command line)
//   mpirun --oversubscribe -np 7 ./example_host_trainer_mpi --check   # the planner's layout
//
// Flags: --enc-tp --enc-dp --bb-tp --bb-pp --bb-dp --gen-tp --gen-dp (omitted:
// the planner's layout for the world size), --frozen-encoder,
// --split-backward, --microbatches N, --batch N, --iterations N, --check
// (iteration 0's gradients on every rank vs the single-process run).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "tiny_mllm/bound_host.hpp"
#include "tiny_mllm/planned.hpp"
#include "tiny_mllm/serial.hpp"

namespace {

struct options {
  std::map<std::string, int> degree;  // "enc-tp" ... "gen-dp": given on the command line
  bool frozen_encoder = false, split_backward = false, check = false;
  int microbatches = 0, batch = 12, iterations = 2;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] {
      disttrain::detail::require(i + 1 < argc, a, "needs a value");
      return std::atoi(argv[++i]);
    };
    if (a == "--frozen-encoder")
      o.frozen_encoder = true;
    else if (a == "--split-backward")
      o.split_backward = true;
    else if (a == "--check")
      o.check = true;
    else if (a == "--microbatches")
      o.microbatches = value();
    else if (a == "--batch")
      o.batch = value();
    else if (a == "--iterations")
      o.iterations = value();
    else if (a.rfind("--enc-", 0) == 0 || a.rfind("--bb-", 0) == 0 || a.rfind("--gen-", 0) == 0)
      o.degree[a.substr(2)] = value();
    else
      disttrain::detail::fail(disttrain::errc::invalid_argument, a, "unknown flag");
  }
  return o;
}

// The planner's layout for `ranks` ranks (TP 1), with the degrees given on the
// command line replacing its own.
disttrain::topology layout(const tiny_mllm::config& c, options& o, int ranks) {
  std::vector<disttrain::topology_module> mods{{"encoder", disttrain::module_role::encoder},
                                               {"backbone", disttrain::module_role::backbone},
                                               {"generator", disttrain::module_role::generator}};
  if (o.degree.empty()) {
    const auto plan = tiny_mllm::plan_layout(c, ranks, o.batch).plan;
    mods = disttrain::topology_of(plan).modules();
    if (o.microbatches == 0) o.microbatches = plan.num_microbatches;
  }
  const char* prefix[3] = {"enc-", "bb-", "gen-"};
  for (std::size_t m = 0; m < 3; ++m)
    for (auto [key, field] : {std::pair{"tp", &disttrain::topology_module::tp},
                              std::pair{"pp", &disttrain::topology_module::pp},
                              std::pair{"dp", &disttrain::topology_module::dp}})
      if (auto it = o.degree.find(std::string(prefix[m]) + key); it != o.degree.end())
        mods[m].*field = it->second;
  mods[0].trainable = !o.frozen_encoder;
  if (o.microbatches == 0) o.microbatches = 4;
  return disttrain::topology(mods);
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  try {
    options o = parse(argc, argv);
    const tiny_mllm::config cfg;
    disttrain::mpi_backend world(MPI_COMM_WORLD, {std::chrono::seconds(60)});
    const disttrain::topology topo = layout(cfg, o, world.size());
    disttrain::detail::require(topo.world_size() == world.size(), "host_trainer",
                               "the layout needs ", topo.world_size(), " ranks, mpirun started ",
                               world.size());
    const int me = world.rank();
    // Once: the chain program, the reorderer, this rank's model and executor.
    const auto chain = disttrain::chain_program(
        topo, {.microbatches = o.microbatches, .split_backward = o.split_backward, .buckets = 2});
    disttrain::reorderer<> reorderer(
        disttrain::reorder_options_of(topo, static_cast<std::uint32_t>(o.microbatches)));
    tiny_mllm::bound_host host(cfg, topo, me, {.lr = 2e-2}, 2);
    host.set_split_backward(o.split_backward);
    disttrain::executor<disttrain::mpi_backend> exec(world);
    if (me == 0)
      std::printf("world %d ranks: %s; %d samples in %d microbatches per iteration\n", world.size(),
                  disttrain::describe(topo).c_str(), o.batch, o.microbatches);
    int status = 0;
    for (int k = 0; k < o.iterations; ++k) {
      // Per batch: the sample map (same on every rank), this rank's bound program, run.
      std::vector<disttrain::sample_meta> costs;
      for (int i = 0; i < o.batch; ++i)
        costs.push_back(
            tiny_mllm::reorder_costs(cfg, topo, static_cast<std::uint64_t>(k * o.batch + i)));
      const disttrain::reorder_result map = reorderer.assign(costs);
      const auto mine =
          disttrain::bind_rank(topo, chain, map, tiny_mllm::link_shapes(cfg, topo, map), me);
      host.begin(map, mine);
      const disttrain::exec_stats st = exec.run(mine.program, host);
      // Loss: one TP rank per replica counts it.
      double mine_loss[2] = {host.coord().tp_rank == 0 ? host.loss() : 0.0,
                             st.exposed_comm_seconds};
      std::vector<double> all(2 * static_cast<std::size_t>(world.size()));
      world.allgather(std::as_bytes(std::span(mine_loss)), std::as_writable_bytes(std::span(all)));
      double loss = 0, wait = 0;
      for (std::size_t i = 0; i < all.size(); i += 2)
        loss += all[i], wait = std::max(wait, all[i + 1]);
      if (me == 0)
        std::printf("iter %d  loss %.6f  %zu messages on rank 0  max exposed comm %.2f ms\n", k,
                    loss, mine.program.num_messages(), wait * 1e3);
      if (k == 0 && o.check) {
        // The serial run on the same batch; every rank compares its gradients.
        tiny_mllm::serial_trainer ref(cfg, {.lr = 2e-2});
        (void)ref.compute_gradients(
            tiny_mllm::make_batch(cfg, 0, static_cast<std::size_t>(o.batch)));
        double err = tiny_mllm::gradient_mismatch(host.last_gradients(), ref);
        std::vector<double> errs(static_cast<std::size_t>(world.size()));
        world.allgather(std::as_bytes(std::span(&err, 1)), std::as_writable_bytes(std::span(errs)));
        for (double e : errs) err = std::max(err, e);
        if (err > 1e-12) status = 1;
        if (me == 0)
          std::printf("max relative gradient error: %.3g\ncheck (limit 1e-12): %s\n", err,
                      status == 0 ? "OK" : "MISMATCH");
      }
    }
    return status;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  return 1;
}
