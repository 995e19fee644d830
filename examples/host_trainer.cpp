// A host trainer in one file: plan -> topology -> per-batch reorder -> bind ->
// execute, over MPI, with the tiny Eigen modules (examples/tiny_mllm). Each
// module has its own TP/PP/DP; every rank binds only its own program.
//
//   mpirun --oversubscribe -np 12 ./example_host_trainer_mpi --enc-tp 2 --enc-dp 2 --bb-tp 2
//       --bb-dp 3 --gen-dp 2 --check                                 # (one command line)
//   mpirun --oversubscribe -np 7 ./example_host_trainer_mpi --check   # the planner's layout
//
// Flags: --enc-tp --enc-dp --bb-tp --bb-pp --bb-dp --gen-tp --gen-dp (omitted:
// the planner's layout for the world size), --encoders 2 (a second encoder,
// --enc2-tp --enc2-dp, after the first: it forwards the first one's tokens to
// the backbone, which adds both), --frozen-encoder,
// --split-backward, --zero-bubble (ZB-H1's order on every stage, B and W
// apart), --virtual-stages V (the backbone runs interleaved 1F1B with
// V model chunks per rank; microbatches a multiple of its pp), --fields (every
// link also carries the samples' text tokens as a second field, which the
// backbone stages use instead of reading the dataset), --microbatches
// N, --batch N, --iterations N, --check
// (iteration 0's gradients on every rank vs the single-process run),
// --batched (each rank's program in rendezvous order, run by the executor's
// batched mode: NCCL's way of issuing point-to-point ops, here over MPI),
// --producers P (the last P ranks of the job load and send the samples:
// data/producer_ranks.hpp; the others train).
#include <cstdio>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/exec/executor.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/schedule/rendezvous_order.hpp"
#include "disttrain/schedule/validate_bound.hpp"
#include "tiny_mllm/bound_host.hpp"
#include "tiny_mllm/parts.hpp"
#include "tiny_mllm/planned.hpp"
#include "tiny_mllm/serial.hpp"

namespace {

struct options {
  std::map<std::string, int> degree;  // "enc-tp" ... "gen-dp": given on the command line
  bool frozen_encoder = false, split_backward = false, zero_bubble = false, check = false,
       batched = false, fields = false;
  int microbatches = 0, batch = 12, iterations = 2, producers = 0, virtual_stages = 1;
  int encoders = 1;
};

options parse(int argc, char** argv) {
  options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const auto value = [&] {
      disttrain::require(i + 1 < argc, a, "needs a value");
      return std::atoi(argv[++i]);
    };
    if (a == "--frozen-encoder")
      o.frozen_encoder = true;
    else if (a == "--split-backward")
      o.split_backward = true;
    else if (a == "--zero-bubble")
      o.zero_bubble = true;
    else if (a == "--fields")
      o.fields = true;
    else if (a == "--check")
      o.check = true;
    else if (a == "--batched")
      o.batched = true;
    else if (a == "--microbatches")
      o.microbatches = value();
    else if (a == "--batch")
      o.batch = value();
    else if (a == "--iterations")
      o.iterations = value();
    else if (a == "--producers")
      o.producers = value();
    else if (a == "--virtual-stages")
      o.virtual_stages = value();
    else if (a == "--encoders")
      o.encoders = value();
    else if (a.rfind("--enc-", 0) == 0 || a.rfind("--enc2-", 0) == 0 || a.rfind("--bb-", 0) == 0 ||
             a.rfind("--gen-", 0) == 0)
      o.degree[a.substr(2)] = value();
    else
      disttrain::fail(disttrain::errc::invalid_argument, a, "unknown flag");
  }
  return o;
}

// The planner's layout for `ranks` ranks (TP 1), with the degrees given on the
// command line replacing its own.
disttrain::topology layout(const tiny_mllm::config& c, options& o, int ranks) {
  disttrain::require(o.encoders == 1 || o.encoders == 2, "--encoders", "is 1 or 2, got ",
                     o.encoders);
  std::vector<disttrain::topology_module> mods{{"encoder", disttrain::module_role::encoder},
                                               {"backbone", disttrain::module_role::backbone},
                                               {"generator", disttrain::module_role::generator}};
  std::vector<std::string> prefix{"enc-", "bb-", "gen-"};
  if (o.encoders == 2) {  // the second encoder runs after the first (docs/planner.md)
    mods.insert(mods.begin() + 1, {"encoder2", disttrain::module_role::encoder});
    prefix.insert(prefix.begin() + 1, "enc2-");
  }
  if (o.degree.empty()) {
    disttrain::require(o.encoders == 1, "--encoders",
                       "2 needs the degrees on the command line (the tiny planner plans one "
                       "encoder)");
    const auto plan = tiny_mllm::plan_layout(c, ranks, o.batch).plan;
    mods = disttrain::topology_of(plan).modules();
    if (o.microbatches == 0) o.microbatches = plan.num_microbatches;
  }
  for (std::size_t m = 0; m < mods.size(); ++m)
    for (auto [key, field] : {std::pair{"tp", &disttrain::topology_module::tp},
                              std::pair{"pp", &disttrain::topology_module::pp},
                              std::pair{"dp", &disttrain::topology_module::dp}})
      if (auto it = o.degree.find(prefix[m] + key); it != o.degree.end())
        mods[m].*field = it->second;
  mods[0].trainable = !o.frozen_encoder;
  mods[mods.size() - 2].chunks = o.virtual_stages;  // the backbone
  if (o.microbatches == 0) o.microbatches = 4;
  return disttrain::topology(mods);
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  try {
    options o = parse(argc, argv);
    tiny_mllm::config cfg;
    cfg.encoders = o.encoders;
    // The last `producers` ranks of the job prepare samples; the others train.
    disttrain::mpi_backend job(MPI_COMM_WORLD, {std::chrono::seconds(60)});
    const int trainers = job.size() - o.producers;
    disttrain::require(o.producers >= 0 && trainers > 0, "--producers", "needs 0 <= P < ",
                       job.size());
    disttrain::producer_ranks_config feed_cfg;
    for (int r = 0; r < job.size(); ++r)
      (r < trainers ? feed_cfg.consumers : feed_cfg.producers).push_back(r);
    const disttrain::batch_sampler sampler = [b = o.batch](std::uint64_t k) {
      std::vector<std::uint64_t> ids;
      for (int i = 0; i < b; ++i)
        ids.push_back(k * static_cast<std::uint64_t>(b) + static_cast<std::uint64_t>(i));
      return ids;
    };
    MPI_Comm train_comm = MPI_COMM_NULL;  // the trainers' own communicator
    MPI_Comm_split(MPI_COMM_WORLD, job.rank() < trainers ? 0 : MPI_UNDEFINED, job.rank(),
                   &train_comm);
    if (job.rank() >= trainers) {
      disttrain::sample_producer<disttrain::mpi_backend, tiny_mllm::sample_parts>(
          job, tiny_mllm::sample_parts{cfg}, feed_cfg, sampler)
          .run(0, static_cast<std::uint64_t>(o.iterations));
      return 0;
    }
    disttrain::mpi_backend world(train_comm, {std::chrono::seconds(60)});
    std::optional<tiny_mllm::remote_samples<disttrain::mpi_backend>> remote;
    if (o.producers > 0) remote.emplace(job, cfg, feed_cfg, sampler);
    const disttrain::topology topo = layout(cfg, o, world.size());
    disttrain::require(topo.world_size() == world.size(), "host_trainer", "the layout needs ",
                       topo.world_size(), " trainer ranks, mpirun started ", world.size(),
                       " (plus ", o.producers, " producers)");
    const int me = world.rank();
    // An interleaved backbone needs a layer per virtual stage (the serial
    // reference below uses the same config).
    const auto& bb = topo.module(topo.backbone());
    cfg.layers = std::max(cfg.layers, bb.pp * bb.chunks);
    // Once: the chain program, the reorderer, this rank's model and executor.
    const auto chain = disttrain::chain_program(topo, {.microbatches = o.microbatches,
                                                       .split_backward = o.split_backward,
                                                       .buckets = 2,
                                                       .zero_bubble = o.zero_bubble});
    disttrain::reorderer<> reorderer(
        disttrain::reorder_options_of(topo, static_cast<std::uint32_t>(o.microbatches)));
    tiny_mllm::bound_host host(cfg, topo, me, {.lr = 2e-2}, 2);
    host.set_split_backward(o.split_backward || o.zero_bubble);
    host.carry_text(o.fields);
    disttrain::executor<disttrain::mpi_backend> exec(world, {.batched = o.batched});
    const disttrain::message_rounds rounds(chain);  // --batched: the rendezvous order
    if (me == 0)
      std::printf("world %d ranks: %s; %d samples in %d microbatches per iteration\n", world.size(),
                  disttrain::describe(topo).c_str(), o.batch, o.microbatches);
    int status = 0;
    for (int k = 0; k < o.iterations; ++k) {
      // Per batch: the sample map (same on every rank), this rank's bound program, run.
      const auto ids = remote ? remote->ids(static_cast<std::uint64_t>(k))
                              : sampler(static_cast<std::uint64_t>(k));
      std::vector<disttrain::sample_meta> costs;
      for (const std::uint64_t id : ids) costs.push_back(tiny_mllm::reorder_costs(cfg, topo, id));
      const disttrain::reorder_result map = reorderer.assign(costs);
      auto mine = disttrain::bind_rank(topo, chain, map,
                                       tiny_mllm::link_shapes(cfg, topo, map, o.fields), me);
      if (o.batched) disttrain::order_for_rendezvous(mine.program, rounds);
      const auto co = topo.coord(me);
      host.begin(map, mine,
                 remote ? remote->fetch(static_cast<std::uint64_t>(k), map,
                                        static_cast<std::size_t>(topo.owning_index(co.module)),
                                        static_cast<std::size_t>(co.replica.value),
                                        topo.module(co.module).role)
                        : tiny_mllm::bound_host::sample_fetch{});
      const disttrain::exec_stats st = exec.run(mine.program, host);
      // Loss: one TP rank per replica counts it.
      double mine_loss[3] = {host.coord().tp_rank == 0 ? host.loss() : 0.0, st.exposed_comm_seconds,
                             remote ? remote->exposed_wait_seconds() : 0.0};
      std::vector<double> all(3 * static_cast<std::size_t>(world.size()));
      world.allgather(std::as_bytes(std::span(mine_loss)), std::as_writable_bytes(std::span(all)));
      double loss = 0, wait = 0, data = 0;
      for (std::size_t i = 0; i < all.size(); i += 3)
        loss += all[i], wait = std::max(wait, all[i + 1]), data = std::max(data, all[i + 2]);
      if (me == 0)
        std::printf("iter %d  loss %.6f  %zu messages on rank 0  max exposed comm %.2f ms\n", k,
                    loss, mine.program.num_messages(), wait * 1e3);
      if (me == 0 && remote)
        std::printf("exposed data wait: %.2f ms/iteration\n", data * 1e3 / (k + 1));
      if (k == 0 && o.check && me == 0) {
        // Every rank's program, checked together: as bound (MPI's buffered
        // sends) and in rendezvous order under NCCL's semantics.
        disttrain::bound_world w = disttrain::bind_world(
            topo, chain, map, tiny_mllm::link_shapes(cfg, topo, map, o.fields));
        (void)disttrain::validate_bound(w);
        disttrain::order_for_rendezvous(w, chain);
        const auto rep = disttrain::validate_bound(w, disttrain::p2p_semantics::rendezvous);
        std::printf(
            "every rank's program: valid buffered, and in rendezvous order under NCCL's "
            "semantics (%zu messages)\n",
            rep.messages);
      }
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
