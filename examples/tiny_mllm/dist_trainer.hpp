#pragma once
/// @file dist_trainer.hpp
/// @brief The tiny model trained disaggregated, threads or processes as
/// ranks: encoder replicas, backbone stages x replicas, generator replicas,
/// each module with its own data-parallel degree, composed from disttrain's
/// parts exactly as examples/host_trainer.cpp does (plan -> topology ->
/// per-batch reorder -> bind -> execute), plus producer threads that load
/// each rank's samples ahead of need:
///
/// - `topology` (core/): the one description of the layout; the chain
///   program, the reorderer's options and the rank numbering derive from it;
/// - `reorderer` (reorder/): the one sample -> (module replica, microbatch,
///   position) map, computed identically on every rank from the batch index;
/// - `bind_rank` (bind/): this rank's program for the batch, every message
///   with its real peer, bytes and tag, TP fan-out and gradient routes
///   included (`validate_bound` / `simulate_bound` check and time the same
///   programs);
/// - `preprocess_pipeline` (data/): producer threads load this rank's
///   samples in the map's order;
/// - `executor` (exec/): runs the program, overlapping communication.
///
/// What is model-specific (running the encoder, backbone stage or generator
/// on rows of the activation buffers) is `bound_host` (bound_host.hpp).
///
/// @code
/// tiny_mllm::dist_plan plan{.enc_dp = 2, .bb_pp = 2, .bb_dp = 3, .gen_dp = 1};
/// // world of plan.world_size() ranks; on each:
/// tiny_mllm::rank_trainer<disttrain::local_backend> t(backend, cfg, plan, {});
/// auto r = t.step(0);  // r.loss: global batch loss (same on every rank)
/// @endcode

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <utility>
#include <vector>

#include "disttrain/bind/bind.hpp"
#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/local_backend.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/reorder/reorderer.hpp"

#include "bound_host.hpp"
#include "data.hpp"
#include "modules.hpp"

namespace tiny_mllm {

/// @brief A disaggregated layout of the tiny model (by hand or from the
/// planner, `to_dist_plan`): TP 1, one stage per side module.
struct dist_plan {
  int enc_dp = 2;                ///< encoder replicas
  int bb_pp = 2;                 ///< backbone pipeline stages
  int bb_dp = 2;                 ///< backbone replicas
  int gen_dp = 1;                ///< generator replicas
  int microbatches = 4;          ///< global microbatches per iteration
  int batch_size = 12;           ///< samples per global batch
  int buckets = 2;               ///< gradient buckets per rank
  bool split_backward = false;   ///< B and W as separate ops (zero-bubble style)
  std::vector<int> bb_layers{};  ///< layers of each backbone stage (empty: as even as possible)

  /// @brief The layout as a topology: encoder / backbone / generator, TP 1.
  [[nodiscard]] disttrain::topology topology() const {
    using disttrain::module_role;
    return disttrain::topology({{"encoder", module_role::encoder, 1, 1, enc_dp},
                                {"backbone", module_role::backbone, 1, bb_pp, bb_dp},
                                {"generator", module_role::generator, 1, 1, gen_dp}});
  }
  [[nodiscard]] int world_size() const { return topology().world_size(); }

  /// @brief Layers of each backbone stage: `bb_layers`, checked, or an even split.
  [[nodiscard]] std::vector<int> stage_layers(const config& c) const {
    using disttrain::require;
    require(bb_pp <= c.layers, "dist_plan.bb_pp", "backbone stages ", bb_pp, " exceed its ",
            c.layers, " layers");
    std::vector<int> out;
    for (int s = 0; s < bb_pp; ++s)
      out.push_back((s + 1) * c.layers / bb_pp - s * c.layers / bb_pp);
    if (bb_layers.empty()) return out;
    require(bb_layers.size() == static_cast<std::size_t>(bb_pp), "dist_plan.bb_layers", "has ",
            bb_layers.size(), " entries, expected bb_pp = ", bb_pp);
    int total = 0;
    for (std::size_t i = 0; i < bb_layers.size(); ++i) {
      disttrain::require_positive(bb_layers[i], disttrain::cat("dist_plan.bb_layers[", i, "]"));
      total += bb_layers[i];
    }
    require(total == c.layers, "dist_plan.bb_layers", "sum to ", total, ", the backbone has ",
            c.layers, " layers");
    return bb_layers;
  }

  /// @brief The reorderer's settings, derived from the topology.
  [[nodiscard]] disttrain::reorder_options reorder() const {
    auto o = disttrain::reorder_options_of(topology(), static_cast<std::uint32_t>(microbatches));
    o.order_budget = 64;  // a dozen samples, a few microbatches: a small search suffices
    return o;
  }
};

/// @brief Loads samples for a rank's `preprocess_pipeline` (a `sample_source`);
/// the loader is replaceable (tests make it stall).
struct sample_loader {
  using item_type = sample;
  using meta_type = sample_meta;
  std::function<sample(std::uint64_t)> load_fn;
  sample load(std::uint64_t id) const { return load_fn(id); }
  sample_meta meta(const sample& s) const { return s.meta; }
};
static_assert(disttrain::sample_source<sample_loader>);

/// @brief Settings of a `rank_trainer`.
struct trainer_options {
  adam::settings optimizer{.lr = 2e-2};
  std::size_t producers = 1;                      ///< producer threads of this rank
  std::chrono::milliseconds data_timeout{10000};  ///< a stalled producer -> errc::timeout
  disttrain::exec_options exec{};               ///< executor settings (overlap, lookahead, timeout)
  std::function<sample(std::uint64_t)> loader;  ///< empty: make_sample(cfg, id)
  bool align_iterations = true;  ///< barrier before each program, so rank timelines share an origin
};

/// @brief What one iteration produced on this rank.
struct step_result {
  double loss = 0.0;                    ///< loss of the whole global batch (summed over ranks)
  double data_wait_seconds = 0.0;       ///< exposed data wait of this rank
  disttrain::exec_stats exec;           ///< executor figures and events
  std::vector<std::uint64_t> consumed;  ///< sample ids this rank consumed, in order
};

/// @brief One rank of the disaggregated training (see the file comment).
template <disttrain::comm_backend B>
class rank_trainer {
 public:
  rank_trainer(B& backend, const config& c, const dist_plan& plan, trainer_options opts)
      : b_(&backend),
        c_(c),
        opts_(std::move(opts)),
        topo_(plan.topology()),
        chain_(disttrain::chain_program(topo_, {.microbatches = plan.microbatches,
                                                .split_backward = plan.split_backward,
                                                .buckets = plan.buckets})),
        reorderer_(plan.reorder()),
        exec_(backend, opts_.exec),
        host_(c, topo_, checked_rank(backend, topo_), opts_.optimizer, plan.buckets,
              plan.stage_layers(c)),
        loader_{opts_.loader ? opts_.loader
                             : std::function<sample(std::uint64_t)>(
                                   [c](std::uint64_t id) { return make_sample(c, id); })},
        pipe_(loader_, {.producers = opts_.producers,
                        .consumers = 1,
                        .max_batches_ahead = 2,
                        .timeout = opts_.data_timeout}),
        batch_size_(plan.batch_size) {
    host_.set_split_backward(plan.split_backward);
    // Batches of a dozen samples: a small exact-search budget keeps the
    // per-iteration reordering cheap (the result stays deterministic).
    reorderer_.balancer().exact_node_budget = 2000;
  }

  /// @brief Runs iteration `k` on global batch `k` (ids k*N .. k*N+N-1) and
  /// prefetches batch k+1 when `prefetch_next`.
  step_result step(std::uint64_t k, bool prefetch_next = false) {
    pipe_.reset_exposed_wait();
    prepare(k);
    if (prefetch_next) prepare(k + 1);
    const disttrain::reorder_result& map = maps_.at(k);
    mine_ = disttrain::bind_rank(topo_, chain_, map, link_shapes(c_, topo_, map), b_->rank());
    step_result res;
    host_.begin(map, mine_, [&](std::uint64_t id) {
      sample s = pipe_.next(0);
      disttrain::require(s.meta.id == id, disttrain::cat("rank ", b_->rank(), " data"),
                         "producers delivered sample ", s.meta.id, ", the sample map expects ", id);
      res.consumed.push_back(id);
      return s;
    });
    if (opts_.align_iterations) b_->barrier();
    res.exec = exec_.run(mine_.program, host_);
    res.data_wait_seconds = pipe_.exposed_wait_seconds();
    // The global loss: every rank's share, summed in rank order.
    const double loss = host_.loss();
    std::vector<double> all(static_cast<std::size_t>(b_->size()));
    b_->allgather(std::as_bytes(std::span(&loss, 1)), std::as_writable_bytes(std::span(all)));
    for (double l : all) res.loss += l;
    last_map_ = std::move(maps_.at(k));
    maps_.erase(k);
    return res;
  }

  /// @brief Every rank's program of the last step (bound on this rank, for traces).
  [[nodiscard]] disttrain::bound_world last_world() const {
    return disttrain::bind_world(topo_, chain_, last_map_, link_shapes(c_, topo_, last_map_));
  }

  /// @brief Gradients (by parameter name) as the optimizer saw them in the last step.
  [[nodiscard]] const std::map<std::string, matrix>& last_gradients() const {
    return host_.last_gradients();
  }
  /// @brief Where this rank sits in the topology (module, stage, replica, TP rank).
  [[nodiscard]] disttrain::topology_coord coord() const { return host_.coord(); }
  [[nodiscard]] const disttrain::topology& topology() const { return topo_; }
  /// @brief This rank's program of the last step.
  [[nodiscard]] const disttrain::bound_rank& bound() const { return mine_; }

 private:
  static int checked_rank(B& backend, const disttrain::topology& t) {
    disttrain::require(backend.size() == t.world_size(), "rank_trainer", "world has ",
                       backend.size(), " ranks, the plan needs ", t.world_size());
    return backend.rank();
  }

  // The sample map of batch k (from the batch index: cheap, identical on
  // every rank) and the request of this rank's samples from the producers.
  void prepare(std::uint64_t k) {
    if (maps_.contains(k)) return;
    std::vector<disttrain::sample_meta> costs;
    const auto N = static_cast<std::uint64_t>(batch_size_);
    for (std::uint64_t id = k * N; id < (k + 1) * N; ++id)
      costs.push_back(reorder_costs(c_, topo_, id));
    const disttrain::reorder_result& map = maps_[k] = reorderer_.assign(costs);
    disttrain::validate(map);
    const auto me = coord();
    const auto column = static_cast<std::size_t>(topo_.owning_index(me.module));
    std::vector<std::uint64_t> order;
    for (std::uint32_t j = 0; j < map.microbatches; ++j)
      for (std::uint32_t idx : map.cell(column, static_cast<std::size_t>(me.replica.value), j))
        order.push_back(map.samples[idx].id);
    if (order.empty()) return;  // this replica has no sample in the whole batch
    pipe_.submit(k, order);
    pipe_.assign(k, {order});
  }

  B* b_;
  config c_;
  trainer_options opts_;
  disttrain::topology topo_;
  disttrain::pipeline_schedule chain_;
  disttrain::reorderer<> reorderer_;
  disttrain::executor<B> exec_;
  bound_host host_;
  sample_loader loader_;
  disttrain::preprocess_pipeline<sample_loader> pipe_;
  int batch_size_ = 0;
  std::map<std::uint64_t, disttrain::reorder_result> maps_;
  disttrain::bound_rank mine_;
  disttrain::reorder_result last_map_;
};

}  // namespace tiny_mllm
