#pragma once
/// @file dist_trainer.hpp
/// @brief The tiny model trained disaggregated: encoder ranks, backbone
/// pipeline stages and generator ranks, each module with its own
/// data-parallel degree, composed from disttrain's parts:
///
/// - `rank_layout` (plan/): which rank is which (module, stage, replica);
/// - `make_multi_module` + `add_communication` + `add_grad_sync` +
///   `validate_schedule` (schedule/): the program of every stage;
/// - `reorderer` (reorder/): the one sample -> (module replica, microbatch,
///   position) map, computed identically on every rank from the batch index;
/// - `plan_route` (comm/): per microbatch, which rank sends which rows of
///   which sample to which rank between modules with different DP degrees
///   (variable shapes, no handshake: both ends hold the metadata);
/// - `preprocess_pipeline` (data/): producer threads load this rank's
///   samples ahead of need, in the reorderer's order;
/// - `executor` (exec/): runs the program, overlapping communication.
///
/// ## How the schedule and the sample map fit together
/// A global microbatch j is split over *all* replicas of every module (the
/// reorderer's cells). Every replica of a stage therefore runs the same
/// program: the program of that stage in the single-replica chain
/// `encoder -> backbone stages -> generator`, which `validate_schedule`
/// checks (order, matching, no deadlock). Its point-to-point ops name the
/// tensor moved (producing stage, microbatch); the peers and sizes of the
/// real messages come from the route plan of microbatch j (one message per
/// pair of ranks that share samples), so the same validated program serves
/// any DP degrees. Gradients flow back along the same routes, reversed.
/// (The schedule's own multi-module form, where each microbatch visits one
/// replica per module, is not used: see docs/exec.md, Limitations.)
///
/// ## Plan
/// The planner targets paper-scale clusters; this tiny plan is built by hand:
/// encoder DP `enc_dp`, backbone `bb_pp` stages x DP `bb_dp`, generator DP
/// `gen_dp`, TP 1 everywhere (the routes handle TP > 1, the tiny model has
/// no tensor parallelism).
///
/// @code
/// tiny_mllm::dist_plan plan{.enc_dp = 2, .bb_pp = 2, .bb_dp = 3, .gen_dp = 1};
/// // world of plan.world_size() ranks; on each:
/// tiny_mllm::rank_trainer<disttrain::local_backend> t(backend, cfg, plan, {});
/// auto r = t.step(0);  // r.loss: global batch loss (same on every rank)
/// @endcode

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "disttrain/bind/placement.hpp"
#include "disttrain/comm/backend.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/comm/sample_placement.hpp"
#include "disttrain/data/preprocess_pipeline.hpp"
#include "disttrain/exec.hpp"
#include "disttrain/kernels/copy_blocks.hpp"
#include "disttrain/plan/rank_layout.hpp"
#include "disttrain/reorder/reorderer.hpp"
#include "disttrain/schedule/communication.hpp"
#include "disttrain/schedule/multi_module.hpp"
#include "disttrain/schedule/validate.hpp"

#include "data.hpp"
#include "modules.hpp"
#include "tensor.hpp"

namespace tiny_mllm {

/// @brief Module indices, in pipeline order (also the reorderer's cost index).
enum module_id : int { encoder_module = 0, backbone_module = 1, generator_module = 2 };

/// @brief A disaggregated plan for the tiny model (built by hand; see the file comment).
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

  /// @brief Segments encoder / backbone / generator, TP 1.
  [[nodiscard]] disttrain::rank_layout layout() const {
    return disttrain::rank_layout({{"encoder", "encoder", 1, 1, enc_dp},
                                   {"backbone", "backbone", 1, bb_pp, bb_dp},
                                   {"generator", "generator", 1, 1, gen_dp}});
  }
  [[nodiscard]] int world_size() const { return layout().world_size(); }
  [[nodiscard]] int num_stages() const { return bb_pp + 2; }

  /// @brief The program of every chain stage: the single-replica chain
  /// encoder -> backbone stages -> generator, with communication and
  /// gradient synchronisation, validated.
  [[nodiscard]] disttrain::pipeline_schedule schedule() const {
    disttrain::multi_module_spec spec;
    spec.segments = {{"encoder", 1, 1}, {"backbone", bb_pp, 1}, {"generator", 1, 1}};
    spec.num_microbatches = microbatches;
    spec.split_backward = split_backward;
    auto s = disttrain::add_grad_sync(
        disttrain::add_communication(disttrain::make_multi_module(spec)), buckets);
    disttrain::validate_schedule(s);
    return s;
  }

  /// @brief The schedule as the world runs it, for traces: one rank per
  /// global rank (segment, stage, replica in rank_layout order), each with
  /// the program of its chain stage. (Its point-to-point peers are the
  /// chain's; the real peers come from the routes.)
  [[nodiscard]] disttrain::pipeline_schedule world_schedule() const {
    disttrain::pipeline_schedule chain = schedule();
    disttrain::pipeline_schedule w = chain;
    w.name = "disaggregated tiny_mllm";
    w.segments = {{"encoder", 0, 1, enc_dp, true},
                  {"backbone", 1, bb_pp, bb_dp, true},
                  {"generator", 1 + bb_pp, 1, gen_dp, true}};
    w.ranks.clear();
    w.ops.clear();
    const auto L = layout();
    for (int r = 0; r < L.world_size(); ++r) {
      const auto c = L.coord(r);
      const int stage = c.segment == 0 ? 0 : c.segment == 1 ? 1 + c.stage : 1 + bb_pp;
      w.ranks.push_back({c.segment, stage, c.replica});
      w.ops.push_back(chain.ops[static_cast<std::size_t>(stage)]);
    }
    return w;
  }

  /// @brief Layers [first, last) of backbone stage `s` (as even as possible).
  [[nodiscard]] std::pair<int, int> layers_of(int s, const config& c) const {
    disttrain::detail::require(bb_pp <= c.layers, "dist_plan.bb_pp", "backbone stages ", bb_pp,
                               " exceed its ", c.layers, " layers");
    if (bb_layers.empty()) return {s * c.layers / bb_pp, (s + 1) * c.layers / bb_pp};
    disttrain::detail::require(bb_layers.size() == static_cast<std::size_t>(bb_pp),
                               "dist_plan.bb_layers", "has ", bb_layers.size(),
                               " entries, expected bb_pp = ", bb_pp);
    int first = 0, total = 0;
    for (int i = 0; i < bb_pp; ++i) {
      disttrain::detail::require_positive(bb_layers[static_cast<std::size_t>(i)],
                                          disttrain::detail::cat("dist_plan.bb_layers[", i, "]"));
      if (i < s) first += bb_layers[static_cast<std::size_t>(i)];
      total += bb_layers[static_cast<std::size_t>(i)];
    }
    disttrain::detail::require(total == c.layers, "dist_plan.bb_layers", "sum to ", total,
                               ", the backbone has ", c.layers, " layers");
    return {first, first + bb_layers[static_cast<std::size_t>(s)]};
  }

  /// @brief The reorderer's settings: one module per segment, stages as in the chain.
  [[nodiscard]] disttrain::reorder_options reorder() const {
    disttrain::reorder_options o;
    o.modules = {{"encoder", static_cast<std::uint32_t>(enc_dp)},
                 {"backbone", static_cast<std::uint32_t>(bb_dp)},
                 {"generator", static_cast<std::uint32_t>(gen_dp)}};
    o.microbatches = static_cast<std::uint32_t>(microbatches);
    const std::vector<std::uint32_t> stages{1, static_cast<std::uint32_t>(bb_pp), 1};
    o.stages = disttrain::chain_stages(stages);
    o.order_budget = 64;  // a dozen samples, a few microbatches: a small search suffices
    return o;
  }
};

/// @brief Per-module costs of a sample for the reorderer: encoder work grows
/// with patches (quadratic within an image, like attention), the backbone's
/// with the sequence, the generator's with the pooled sequence.
inline disttrain::sample_meta sample_costs(const sample_meta& m) {
  disttrain::sample_meta out;
  out.id = m.id;
  double enc = 0.0;
  for (int p : m.patches) enc += static_cast<double>(p) * (1.0 + static_cast<double>(p));
  out.cost = {enc, static_cast<double>(m.seq_len()), 1.0 + 0.1 * static_cast<double>(m.seq_len()),
              0.0};
  out.modules = 3;  // indexed by module_id: the reorderer checks it against its options
  return out;
}

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
  using grad_type = double;

  rank_trainer(B& backend, const config& c, const dist_plan& plan, trainer_options opts)
      : b_(&backend),
        c_(c),
        plan_(plan),
        opts_(std::move(opts)),
        layout_(plan.layout()),
        sched_(plan.schedule()),
        reorderer_(plan.reorder()),
        tags_(sched_.num_stages, sched_.num_chunks, sched_.num_microbatches),
        exec_(backend, tags_, opts_.exec),
        loader_{opts_.loader ? opts_.loader
                             : std::function<sample(std::uint64_t)>(
                                   [c](std::uint64_t id) { return make_sample(c, id); })},
        pipe_(loader_, {.producers = opts_.producers,
                        .consumers = 1,
                        .max_batches_ahead = 2,
                        .timeout = opts_.data_timeout}) {
    disttrain::detail::require(backend.size() == layout_.world_size(), "rank_trainer", "world has ",
                               backend.size(), " ranks, the plan needs ", layout_.world_size());
    coord_ = layout_.coord(backend.rank());
    module_ = coord_.segment;
    chain_stage_ = module_ == encoder_module    ? 0
                   : module_ == backbone_module ? 1 + coord_.stage
                                                : 1 + plan.bb_pp;
    if (module_ == encoder_module) enc_.emplace_back(c);
    if (module_ == backbone_module) {
      const auto [l0, l1] = plan.layers_of(coord_.stage, c);
      bb_.emplace_back(c, l0, l1);
    }
    if (module_ == generator_module) gen_.emplace_back(c);
    // Batches of a dozen samples: a small exact-search budget keeps the
    // per-iteration reordering cheap (the result stays deterministic).
    reorderer_.balancer().exact_node_budget = 2000;
    group_ = layout_.dp_group(coord_.segment, coord_.stage, 0);
    const auto ps = params();
    for (std::size_t i = 0; i < ps.size(); ++i)
      bucket_of_.push_back(
          static_cast<int>(i * static_cast<std::size_t>(plan.buckets) / ps.size()));
    buckets_.resize(static_cast<std::size_t>(plan.buckets));
  }

  /// @brief Runs iteration `k` on global batch `k` (ids k*N .. k*N+N-1) and
  /// prefetches batch k+1 when `prefetch_next`.
  step_result step(std::uint64_t k, bool prefetch_next = false) {
    pipe_.reset_exposed_wait();
    prepare(k);
    if (prefetch_next) prepare(k + 1);
    begin_iteration(k);
    result_ = step_result{};
    loss_ = 0.0;
    if (opts_.align_iterations) b_->barrier();
    result_.exec = exec_.run(sched_.ops[static_cast<std::size_t>(chain_stage_)], *this);
    result_.data_wait_seconds = pipe_.exposed_wait_seconds();
    // The global loss: every rank's share, summed in rank order.
    std::vector<double> all(static_cast<std::size_t>(b_->size()));
    b_->allgather(std::as_bytes(std::span(&loss_, 1)), std::as_writable_bytes(std::span(all)));
    for (double l : all) result_.loss += l;
    batches_.erase(k);
    return std::move(result_);
  }

  /// @brief Gradients (by parameter name) as the optimizer saw them in the last step.
  [[nodiscard]] const std::map<std::string, matrix>& last_gradients() const { return last_grads_; }
  /// @brief This rank's parameters.
  [[nodiscard]] std::span<param_tensor> params() {
    if (!enc_.empty()) return enc_.front().params();
    if (!bb_.empty()) return bb_.front().params();
    return gen_.front().params();
  }
  [[nodiscard]] const disttrain::rank_coord& coord() const { return coord_; }
  [[nodiscard]] int chain_stage() const { return chain_stage_; }
  [[nodiscard]] const disttrain::pipeline_schedule& schedule() const { return sched_; }

  // ---- exec_host ----------------------------------------------------------

  void forward(const disttrain::schedule_op& op) {
    micro& mb = micro_.at(static_cast<std::size_t>(op.microbatch));
    std::int64_t in_row = 0, out_row = 0;
    for (std::uint64_t id : mb.mine) {
      const sample& s = fetch(id);
      const sample_meta& m = s.meta;
      if (module_ == encoder_module) {
        write_rows(mb.y, out_row, enc_.front().forward(id, s.images));
        out_row += m.num_images();
      } else if (module_ == backbone_module) {
        const int rows = coord_.stage == 0 ? m.num_images() : m.seq_len();
        auto out = bb_.front().forward(id, read_rows(mb.x, in_row, rows), s.text);
        in_row += rows;
        write_rows(mb.y, out_row, out.hidden);
        out_row += m.seq_len();
        loss_ += out.loss;
      } else {
        loss_ += gen_.front().forward(id, read_rows(mb.x, in_row, m.seq_len()), s.target);
        in_row += m.seq_len();
      }
    }
  }

  void backward(const disttrain::schedule_op& op) {
    micro& mb = micro_.at(static_cast<std::size_t>(op.microbatch));
    std::int64_t in_row = 0, out_row = 0;
    for (std::uint64_t id : mb.mine) {
      const sample_meta& m = batch().samples.at(id).meta;
      if (module_ == encoder_module) {
        enc_.front().backward_input(id, read_rows(mb.dy, out_row, m.num_images()));
        out_row += m.num_images();
      } else if (module_ == backbone_module) {
        const int rows = coord_.stage == 0 ? m.num_images() : m.seq_len();
        write_rows(mb.dx, in_row,
                   bb_.front().backward_input(id, read_rows(mb.dy, out_row, m.seq_len())));
        in_row += rows;
        out_row += m.seq_len();
      } else {
        write_rows(mb.dx, in_row, gen_.front().backward_input(id));
        in_row += m.seq_len();
      }
      if (!sched_.split_backward) weight_of(id);
    }
  }

  void weight(const disttrain::schedule_op& op) {
    for (std::uint64_t id : micro_.at(static_cast<std::size_t>(op.microbatch)).mine) weight_of(id);
  }

  void messages(const disttrain::schedule_op& op, std::vector<disttrain::exec_message>& out) {
    micro& mb = micro_.at(static_cast<std::size_t>(op.microbatch));
    const int me = b_->rank();
    auto& staging = staging_[{static_cast<int>(op.kind), op.microbatch}];
    staging.clear();
    const auto add = [&](const disttrain::route_message& m, int peer,
                         std::span<const double> pack_from,
                         const std::vector<disttrain::kernels::copy_block>& blocks) {
      std::vector<double>& buf = staging.emplace_back(static_cast<std::size_t>(m.elements));
      if (!pack_from.empty() || !blocks.empty())
        disttrain::kernels::copy_blocks_cpu(std::as_bytes(pack_from),
                                            std::as_writable_bytes(std::span(buf)), blocks,
                                            sizeof(double));
      out.push_back({peer, std::as_writable_bytes(std::span(buf)), 0});
    };
    switch (op.kind) {
      case disttrain::op_kind::recv_act:  // activations of my input route
        for (int i : mb.in.recvs_of(me, 0)) add(msg(mb.in, i), msg(mb.in, i).src, {}, {});
        break;
      case disttrain::op_kind::send_act:  // my output, packed per receiver
        for (int i : mb.out.sends_of(me, 0))
          add(msg(mb.out, i), msg(mb.out, i).dst, mb.y, msg(mb.out, i).send_blocks);
        break;
      case disttrain::op_kind::recv_grad:  // gradient of my output: the output route reversed
        for (int i : mb.out.sends_of(me, 0)) add(msg(mb.out, i), msg(mb.out, i).dst, {}, {});
        break;
      case disttrain::op_kind::send_grad:  // gradient of my input, back along the input route
        for (int i : mb.in.recvs_of(me, 0))
          add(msg(mb.in, i), msg(mb.in, i).src, mb.dx, reversed(msg(mb.in, i).recv_blocks));
        break;
      default:
        disttrain::detail::fail(disttrain::errc::internal, "rank_trainer", "messages() for ",
                                disttrain::describe(op));
    }
  }

  void received(const disttrain::schedule_op& op) {
    micro& mb = micro_.at(static_cast<std::size_t>(op.microbatch));
    const int me = b_->rank();
    auto& staging = staging_.at({static_cast<int>(op.kind), op.microbatch});
    const bool act = op.kind == disttrain::op_kind::recv_act;
    const std::vector<int> idx = act ? mb.in.recvs_of(me, 0) : mb.out.sends_of(me, 0);
    for (std::size_t k = 0; k < idx.size(); ++k) {
      const auto& m = msg(act ? mb.in : mb.out, idx[k]);
      const auto blocks = act ? m.recv_blocks : reversed(m.send_blocks);
      disttrain::kernels::copy_blocks_cpu(std::as_bytes(std::span(staging[k])),
                                          std::as_writable_bytes(std::span(act ? mb.x : mb.dy)),
                                          blocks, sizeof(double));
    }
    staging.clear();
  }

  disttrain::grad_bucket<double> bucket_ready(const disttrain::schedule_op& op) {
    std::vector<double>& buf = buckets_.at(static_cast<std::size_t>(op.bucket));
    buf.clear();
    const auto ps = params();
    for (std::size_t i = 0; i < ps.size(); ++i)
      if (bucket_of_[i] == op.bucket)
        buf.insert(buf.end(), ps[i].grad.data(), ps[i].grad.data() + ps[i].grad.size());
    return {std::span(buf), std::span<const int>(group_)};
  }

  void bucket_reduced(const disttrain::schedule_op& op) {
    const std::vector<double>& buf = buckets_.at(static_cast<std::size_t>(op.bucket));
    const auto ps = params();
    std::size_t o = 0;
    for (std::size_t i = 0; i < ps.size(); ++i)
      if (bucket_of_[i] == op.bucket) {
        const auto n = static_cast<std::size_t>(ps[i].grad.size());
        std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(o), n, ps[i].grad.data());
        o += n;
      }
  }

  void optimizer_step(const disttrain::schedule_op&) {
    for (const auto& p : params()) last_grads_[p.name] = p.grad;
    optimizer_.step(params());
  }

 private:
  using rm_matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  // One global batch as this rank sees it.
  struct batch_state {
    disttrain::reorder_result map;            // identical on every rank
    std::vector<sample_meta> meta;            // by index in map.samples
    std::map<std::uint64_t, sample> samples;  // loaded samples this rank consumed
  };
  // One microbatch as this rank sees it.
  struct micro {
    std::vector<std::uint64_t> mine;   // my samples, in my cell's order
    disttrain::route_plan in, out;     // routes into / out of my stage
    std::vector<double> x, y, dx, dy;  // input, output and their gradients (row-major)
  };

  static const disttrain::route_message& msg(const disttrain::route_plan& p, int i) {
    return p.messages()[static_cast<std::size_t>(i)];
  }
  static std::vector<disttrain::kernels::copy_block> reversed(
      const std::vector<disttrain::kernels::copy_block>& v) {
    std::vector<disttrain::kernels::copy_block> out;
    out.reserve(v.size());
    for (const auto& b : v)
      out.push_back({b.dst_offset, b.src_offset, b.rows, b.cols, b.dst_ld, b.src_ld});
    return out;
  }
  matrix read_rows(const std::vector<double>& buf, std::int64_t row, int rows) const {
    const auto D = static_cast<std::int64_t>(c_.model_dim);
    disttrain::detail::ensure((row + rows) * D <= static_cast<std::int64_t>(buf.size()),
                              "rank_trainer", "rows [", row, ", ", row + rows,
                              ") outside a buffer of ", buf.size(), " values");
    return Eigen::Map<const rm_matrix>(buf.data() + row * D, rows, D);
  }
  void write_rows(std::vector<double>& buf, std::int64_t row, const matrix& m) const {
    const auto D = static_cast<std::int64_t>(c_.model_dim);
    disttrain::detail::ensure((row + m.rows()) * D <= static_cast<std::int64_t>(buf.size()),
                              "rank_trainer", "rows [", row, ", ", row + m.rows(),
                              ") outside a buffer of ", buf.size(), " values");
    Eigen::Map<rm_matrix>(buf.data() + row * D, m.rows(), D) = m;
  }

  batch_state& batch() { return batches_.at(current_); }

  // The sample map of batch k (from the batch index: cheap, identical on
  // every rank) and the request of this rank's samples from the producers.
  void prepare(std::uint64_t k) {
    if (batches_.contains(k)) return;
    batch_state& st = batches_[k];
    const auto N = static_cast<std::uint64_t>(plan_.batch_size);
    std::vector<disttrain::sample_meta> costs;
    for (std::uint64_t id = k * N; id < (k + 1) * N; ++id)
      costs.push_back(sample_costs(make_meta(c_, id)));
    st.map = reorderer_.assign(costs);
    disttrain::validate(st.map);
    for (const auto& p : st.map.samples) st.meta.push_back(make_meta(c_, p.id));
    std::vector<std::uint64_t> order;
    for (std::uint32_t j = 0; j < st.map.microbatches; ++j)
      for (std::uint32_t idx : st.map.cell(static_cast<std::size_t>(module_),
                                           static_cast<std::size_t>(coord_.replica), j))
        order.push_back(st.map.samples[idx].id);
    if (order.empty()) return;  // this replica has no sample in the whole batch
    pipe_.submit(k, order);
    pipe_.assign(k, {order});
  }

  // Microbatch geometry of batch k: my samples, my routes, my buffers.
  void begin_iteration(std::uint64_t k) {
    current_ = k;
    const batch_state& st = batch();
    const double scale = 1.0 / static_cast<double>(st.map.samples.size());
    for (auto& b : bb_) b.set_loss_scale(scale);
    for (auto& g : gen_) g.set_loss_scale(scale);
    for (auto& p : params()) p.grad.setZero();
    micro_.assign(st.map.microbatches, micro{});
    for (std::uint32_t j = 0; j < st.map.microbatches; ++j) {
      micro& mb = micro_[j];
      // Samples of microbatch j, numbered locally by ascending id; every
      // module's placement uses that numbering (bind/placement.hpp).
      const disttrain::microbatch_placement mp = disttrain::microbatch_placements(st.map, j);
      const std::vector<std::uint32_t>& members = mp.samples;
      const auto shape = [&](bool images) {
        disttrain::activation_shape a;
        for (std::uint32_t idx : members)
          a.rows.push_back(images ? st.meta[idx].num_images() : st.meta[idx].seq_len());
        a.hidden = c_.model_dim;
        a.elem_size = sizeof(double);
        return a;
      };
      for (std::uint32_t idx : st.map.cell(static_cast<std::size_t>(module_),
                                           static_cast<std::size_t>(coord_.replica), j))
        mb.mine.push_back(st.map.samples[idx].id);
      const auto& enc = mp.module[static_cast<std::size_t>(encoder_module)];
      const auto& bb = mp.module[static_cast<std::size_t>(backbone_module)];
      const auto& gen = mp.module[static_cast<std::size_t>(generator_module)];
      const int last_bb = plan_.bb_pp - 1;
      if (module_ == backbone_module) {
        mb.in = coord_.stage == 0
                    ? disttrain::plan_boundary_route(layout_, 0, enc, bb, shape(true))
                    : disttrain::plan_stage_route(layout_, 1, coord_.stage - 1, bb, shape(false));
        mb.out = coord_.stage == last_bb
                     ? disttrain::plan_boundary_route(layout_, 1, bb, gen, shape(false))
                     : disttrain::plan_stage_route(layout_, 1, coord_.stage, bb, shape(false));
      } else if (module_ == encoder_module) {
        mb.out = disttrain::plan_boundary_route(layout_, 0, enc, bb, shape(true));
      } else {
        mb.in = disttrain::plan_boundary_route(layout_, 1, bb, gen, shape(false));
      }
      const int me = b_->rank();
      const auto in_n = static_cast<std::size_t>(mb.in.destination_elements(me));
      const auto out_n = static_cast<std::size_t>(mb.out.source_elements(me));
      mb.x.assign(in_n, 0.0);
      mb.dx.assign(in_n, 0.0);
      mb.y.assign(out_n, 0.0);
      mb.dy.assign(out_n, 0.0);
    }
    staging_.clear();
  }

  // The next sample from this rank's producers; it must be the expected one.
  const sample& fetch(std::uint64_t id) {
    sample s = pipe_.next(0);
    disttrain::detail::require(
        s.meta.id == id, disttrain::detail::cat("rank ", b_->rank(), " data"),
        "producers delivered sample ", s.meta.id, ", the sample map expects ", id);
    result_.consumed.push_back(id);
    auto [it, fresh] = batch().samples.emplace(id, std::move(s));
    disttrain::detail::require(fresh, disttrain::detail::cat("rank ", b_->rank(), " data"),
                               "sample ", id, " delivered twice in one iteration");
    return it->second;
  }

  void weight_of(std::uint64_t id) {
    if (module_ == encoder_module)
      enc_.front().backward_weight(id);
    else if (module_ == backbone_module)
      bb_.front().backward_weight(id);
    else
      gen_.front().backward_weight(id);
  }

  B* b_;
  config c_;
  dist_plan plan_;
  trainer_options opts_;
  disttrain::rank_layout layout_;
  disttrain::pipeline_schedule sched_;
  disttrain::reorderer<> reorderer_;
  disttrain::message_tags tags_;
  disttrain::executor<B> exec_;
  sample_loader loader_;
  disttrain::preprocess_pipeline<sample_loader> pipe_;
  disttrain::rank_coord coord_;
  int module_ = 0;
  int chain_stage_ = 0;
  std::vector<encoder> enc_;
  std::vector<backbone_stage> bb_;
  std::vector<generator> gen_;
  adam optimizer_{opts_.optimizer};
  std::vector<int> group_;
  std::vector<int> bucket_of_;
  std::vector<std::vector<double>> buckets_;
  std::map<std::uint64_t, batch_state> batches_;
  std::uint64_t current_ = 0;
  std::vector<micro> micro_;
  std::map<std::pair<int, int>, std::vector<std::vector<double>>> staging_;
  std::map<std::string, matrix> last_grads_;
  step_result result_;
  double loss_ = 0.0;
};

}  // namespace tiny_mllm
