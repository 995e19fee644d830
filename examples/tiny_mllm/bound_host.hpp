#pragma once
/// @file bound_host.hpp
/// @brief The tiny model as a `exec_host`: what is model-specific about
/// running a bound program (bind/bind.hpp) on one rank, and nothing else.
///
/// Per op it runs its module (encoder, backbone stage or generator) over its
/// samples of the microbatch, in the sample map's order, reading and writing
/// rows of `activation_buffers`; messages, routes, TP fan-out and gradient
/// routes are the library's. The tiny modules have no tensor-parallel math:
/// the TP ranks of a replica compute the same values (each receives the full
/// activation through the route's fan-out), so every TP rank's gradients must
/// equal the serial run's.
///
/// Link shapes (`link_shapes`): the encoder sends one row per image, every
/// backbone stage one row per token, all `model_dim` wide. With two encoders
/// (`config::encoders`, both owning ranks) they run one after the other: the
/// second forwards the first one's tokens to the backbone in the field
/// "enc1" (and their gradient back), and the backbone's first stage adds
/// both encoders' tokens. With `text`, every
/// link also carries the field "text": the sample's text tokens (one row
/// each, stored as doubles, not differentiable), which the encoder ranks
/// read with the images and every backbone stage then takes from its input
/// instead of from the dataset (`bound_host::carry_text`): the hidden
/// states and what later stages need to go with them travel together.
///
/// An interleaved backbone (`topology_module::chunks` v > 1) holds v
/// `backbone_stage`s per rank, chunk c of stage s running the layers of
/// virtual stage c * pp + s (Megatron-LM's assignment); F and B run the
/// op's chunk, and each chunk has its own optimizer state.

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "disttrain/bind/activation_buffers.hpp"
#include "disttrain/bind/bind.hpp"
#include "disttrain/exec/host.hpp"

#include "data.hpp"
#include "modules.hpp"
#include "tensor.hpp"

namespace tiny_mllm {

/// @brief Whether the first encoder that owns ranks trains (its forwarded
/// tokens' gradient then flows back to it).
inline bool first_encoder_trains(const disttrain::topology& t) {
  for (const disttrain::module_id o : t.owning_modules())
    if (t.module(o).role == disttrain::module_role::encoder) return t.module(o).trainable;
  return false;
}

/// @brief Whether module `m` of `t` is an encoder after another encoder that
/// owns ranks (the second of `config::encoders` 2): it forwards the first
/// one's tokens to the backbone beside its own (docs/planner.md, "Several
/// encoders or generators").
inline bool forwards_tokens(const disttrain::topology& t, disttrain::module_id m) {
  if (t.module(m).role != disttrain::module_role::encoder) return false;
  for (const disttrain::module_id o : t.owning_modules()) {
    if (o == m) return false;
    if (t.module(o).role == disttrain::module_role::encoder) return true;
  }
  return false;
}

/// @brief The activation crossing each link of `t`'s chain for the samples of `map`.
inline std::vector<disttrain::link_shape> link_shapes(const config& c, const disttrain::topology& t,
                                                      const disttrain::reorder_result& map,
                                                      bool text = false) {
  std::vector<disttrain::link_shape> out(static_cast<std::size_t>(t.num_links()));
  for (std::size_t l = 0; l < out.size(); ++l) {
    const disttrain::module_id from_id = t.chain_at(t.virtual_at(static_cast<int>(l)).first).first;
    const auto from = t.module(from_id).role;
    // A second encoder forwards the first one's tokens (field "enc1", last).
    const bool forwards = forwards_tokens(t, from_id);
    disttrain::link_field enc1{.name = "enc1",
                               .hidden = c.model_dim,
                               .elem_size = sizeof(double),
                               .rows = {},
                               .split = disttrain::split_axis::rows,
                               .differentiable = first_encoder_trains(t)};
    disttrain::link_field& f = out[l].fields.emplace_back();
    f.hidden = c.model_dim;
    f.elem_size = sizeof(double);
    disttrain::link_field tokens{.name = "text",
                                 .hidden = 1,
                                 .elem_size = sizeof(double),
                                 .rows = {},
                                 .split = disttrain::split_axis::rows,
                                 .differentiable = false};
    for (const auto& s : map.samples) {
      const sample_meta m = make_meta(c, s.id);
      f.rows.push_back(from == disttrain::module_role::encoder ? m.num_images() : m.seq_len());
      tokens.rows.push_back(m.text_len);
      enc1.rows.push_back(m.num_images());
    }
    if (text) out[l].fields.push_back(std::move(tokens));
    if (forwards) out[l].fields.push_back(std::move(enc1));
  }
  return out;
}

/// @brief Per-module reorderer costs of a sample, over the topology's modules that own ranks.
inline disttrain::sample_meta reorder_costs(const config& c, const disttrain::topology& t,
                                            std::uint64_t id) {
  const sample_meta m = make_meta(c, id);
  disttrain::sample_meta out;
  out.id = id;
  out.modules = static_cast<std::uint32_t>(t.owning_modules().size());
  double enc = 0.0;
  for (int p : m.patches) enc += static_cast<double>(p) * (1.0 + static_cast<double>(p));
  for (std::size_t k = 0; k < t.owning_modules().size(); ++k) {
    const auto role = t.module(t.owning_modules()[k]).role;
    out.cost[k] = role == disttrain::module_role::encoder    ? enc
                  : role == disttrain::module_role::backbone ? static_cast<double>(m.seq_len())
                                                             : 1.0 + 0.1 * m.seq_len();
  }
  return out;
}

/// @brief One rank of the tiny model running bound programs (see the file comment).
class bound_host {
 public:
  using grad_type = double;

  /// @brief The module of global rank `rank` of `t`; backbone virtual stage
  /// u of n = pp * chunks holds layers [u*L/n, (u+1)*L/n) unless `bb_layers`
  /// gives each stage's count (each chunk then holds its 1/chunks share).
  /// `buckets`: the gradient buckets per chunk of the chain program (parameters split evenly).
  bound_host(const config& c, const disttrain::topology& t, int rank, adam::settings opt,
             int buckets = 1, const std::vector<int>& bb_layers = {})
      : c_(c),
        coord_(t.coord(rank)),
        role_(t.module(coord_.module).role),
        module_index_(t.owning_index(coord_.module)) {
    forwards_ = forwards_tokens(t, coord_.module);
    for (const disttrain::module_id o : t.owning_modules()) sums_ = sums_ || forwards_tokens(t, o);
    if (role_ == disttrain::module_role::encoder) enc_.emplace_back(c, forwards_ ? "enc2" : "enc");
    if (role_ == disttrain::module_role::generator) gen_.emplace_back(c);
    if (role_ == disttrain::module_role::backbone) {
      const int pp = t.module(coord_.module).pp, s = coord_.stage.value;
      const int v = t.module(coord_.module).chunks, n = pp * v;
      for (int k = 0; k < v; ++k) {
        const int u = k * pp + s;  // this chunk's virtual stage within the backbone
        int first = u * c.layers / n, last = (u + 1) * c.layers / n;
        if (!bb_layers.empty()) {
          int total = 0, before = 0;
          for (int i = 0; i < pp; ++i) {
            total += bb_layers.at(static_cast<std::size_t>(i));
            if (i < s) before += bb_layers.at(static_cast<std::size_t>(i));
          }
          first = k * total / v + before / v;
          last = first + bb_layers.at(static_cast<std::size_t>(s)) / v;
        }
        bb_.emplace_back(c, first, last);
      }
      first_stage_ = s == 0;
    }
    optimizers_.assign(parts(), adam(opt));
    // The chain program's buckets are per chunk (chunk k's start after its
    // last backward): part k's parameters split evenly over buckets
    // k * buckets .. (k + 1) * buckets - 1.
    const auto per = static_cast<std::size_t>(buckets);
    buckets_.resize(per * parts());
    for (std::size_t k = 0; k < parts(); ++k) {
      const std::size_t n = params(k).size();
      for (std::size_t i = 0; i < n; ++i) bucket_of_.push_back(k * per + i * per / n);
    }
  }

  /// @brief Where samples come from: called once per sample of this rank, in
  /// the map's order (microbatch by microbatch, cell order), when F first needs it.
  using sample_fetch = std::function<sample(std::uint64_t)>;

  /// @brief Starts an iteration on `map` with this rank's bound program `mine`
  /// (both must outlive it): zeroes gradients, sizes buffers. Samples come
  /// from `fetch` (empty: `make_sample`).
  void begin(const disttrain::reorder_result& map, const disttrain::bound_rank& mine,
             sample_fetch fetch = {}) {
    map_ = &map;
    buf_.reset(mine);
    loss_ = 0.0;
    const double scale = 1.0 / static_cast<double>(map.samples.size());
    for (auto& b : bb_) b.set_loss_scale(scale);
    for (auto& g : gen_) g.set_loss_scale(scale);
    for_each_param([](param_tensor& p) { p.grad.setZero(); });
    samples_.clear();
    fetch_ = fetch ? std::move(fetch) : [c = c_](std::uint64_t id) { return make_sample(c, id); };
  }

  // ---- exec_host ---------------------------------------------------
  void forward(const disttrain::schedule_op& op) {
    const auto x = buf_.input(op.microbatch, op.chunk);
    const auto y = buf_.output(op.microbatch, op.chunk);
    std::int64_t in = 0, out = 0, text_at = 0;
    for (const std::uint64_t id : mine_of(op.microbatch)) {
      auto at = samples_.find(id);
      if (at == samples_.end()) at = samples_.emplace(id, fetch_(id)).first;
      const sample& s = at->second;
      // The text travels with the activation (carry_text): the encoder
      // sends its samples', each backbone stage uses and forwards what it got.
      const bool carried = text_ && gen_.empty();  // the generator uses no text
      std::vector<int> received;
      if (carried) received = pass_text(op, text_at, s.text);
      const std::vector<int>& text = carried ? received : s.text;
      if (!enc_.empty()) {
        const matrix own = enc_.front().forward(id, s.images);
        if (forwards_) {  // the first encoder's tokens, on to the backbone
          const int n = s.meta.num_images();
          write(buf_.output(op.microbatch, op.chunk, forwarded_field()), out, read(x, in, n));
          in += n;
        }
        out = write(y, out, own);
      } else if (!bb_.empty()) {
        const bool images = first_stage_ && op.chunk == 0;
        const int rows = images ? s.meta.num_images() : s.meta.seq_len();
        matrix input = read(x, in, rows);
        if (images && sums_)  // two encoders: their tokens add up
          input = input + read(buf_.input(op.microbatch, op.chunk, forwarded_field()), in, rows);
        auto r = chunk(op).forward(id, input, text);
        in += rows;
        out = write(y, out, r.hidden);
        loss_ += r.loss;
      } else {
        loss_ += gen_.front().forward(id, read(x, in, s.meta.seq_len()), s.target);
        in += s.meta.seq_len();
      }
    }
  }
  void backward(const disttrain::schedule_op& op) {
    const auto dx = buf_.input_grad(op.microbatch, op.chunk);
    const auto dy = buf_.output_grad(op.microbatch, op.chunk);
    std::int64_t in = 0, out = 0;
    for (const std::uint64_t id : mine_of(op.microbatch)) {
      const sample_meta& m = samples_.at(id).meta;
      if (!enc_.empty()) {
        enc_.front().backward_input(id, read(dy, out, m.num_images()));
        if (forwards_ && !dx.empty())  // the forwarded tokens' gradient, back to the first
          write(dx, out,               // encoder (unless it is frozen)
                read(buf_.output_grad(op.microbatch, op.chunk, forwarded_field()), out,
                     m.num_images()));
        out += m.num_images();
      } else if (!bb_.empty()) {
        const matrix d = chunk(op).backward_input(id, read(dy, out, m.seq_len()));
        out += m.seq_len();
        if (sums_ && first_stage_ && op.chunk == 0) {
          const auto df = buf_.input_grad(op.microbatch, op.chunk, forwarded_field());
          if (!df.empty()) write(df, in, d);  // (empty: the first encoder is frozen)
        }
        in = write(dx, in, d);
      } else {
        in = write(dx, in, gen_.front().backward_input(id));
      }
      if (!split_) weight_of(op, id);
    }
  }
  void weight(const disttrain::schedule_op& op) {
    for (const std::uint64_t id : mine_of(op.microbatch)) weight_of(op, id);
  }
  void optimizer_step(const disttrain::schedule_op&) {
    for_each_param([&](param_tensor& p) { last_grads_[p.name] = p.grad; });
    for (std::size_t k = 0; k < parts(); ++k) optimizers_[k].step(params(k));
  }
  disttrain::grad_bucket<double> bucket_ready(const disttrain::schedule_op& op) {
    std::vector<double>& buf = buckets_.at(static_cast<std::size_t>(op.bucket));
    buf.clear();
    std::size_t i = 0;
    for_each_param([&](param_tensor& p) {
      if (bucket_of_[i++] == static_cast<std::size_t>(op.bucket))
        buf.insert(buf.end(), p.grad.data(), p.grad.data() + p.grad.size());
    });
    return {std::span(buf)};
  }
  void bucket_reduced(const disttrain::schedule_op& op) {
    const std::vector<double>& buf = buckets_.at(static_cast<std::size_t>(op.bucket));
    std::size_t i = 0, o = 0;
    for_each_param([&](param_tensor& p) {
      if (bucket_of_[i++] != static_cast<std::size_t>(op.bucket)) return;
      const auto n = static_cast<std::size_t>(p.grad.size());
      std::copy_n(buf.begin() + static_cast<std::ptrdiff_t>(o), n, p.grad.data());
      o += n;
    });
  }
  std::span<std::byte> payload(const disttrain::bound_op& b) { return buf_.payload(b); }
  void received(const disttrain::bound_op& b) { buf_.received(b); }

  /// @brief B also computes weight gradients unless the schedule splits them.
  void set_split_backward(bool split) { split_ = split; }
  /// @brief The links carry the field "text" (`link_shapes(..., true)`):
  /// backbone stages take the tokens from their input, not from the dataset.
  void carry_text(bool text) { text_ = text; }
  /// @brief This rank's share of the batch loss (summed over its samples).
  [[nodiscard]] double loss() const { return loss_; }
  /// @brief Gradients by parameter name as the optimizer last saw them.
  [[nodiscard]] const std::map<std::string, matrix>& last_gradients() const { return last_grads_; }
  /// @brief Modules this rank runs: the backbone's chunks, or one.
  [[nodiscard]] std::size_t parts() const { return bb_.empty() ? 1 : bb_.size(); }
  /// @brief Parameters of part `k` (`parts()`).
  [[nodiscard]] std::span<param_tensor> params(std::size_t k = 0) {
    if (!enc_.empty()) return enc_.front().params();
    if (!bb_.empty()) return bb_.at(k).params();
    return gen_.front().params();
  }
  /// @brief Calls fn(param) on every parameter of every part, in part order.
  template <class F>
  void for_each_param(F&& fn) {
    for (std::size_t k = 0; k < parts(); ++k)
      for (param_tensor& p : params(k)) fn(p);
  }
  [[nodiscard]] const disttrain::topology_coord& coord() const { return coord_; }

 private:
  using rm_matrix = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

  // Sample ids of this replica in microbatch j, in the map's order.
  std::vector<std::uint64_t> mine_of(int j) const {
    std::vector<std::uint64_t> ids;
    for (const std::uint32_t idx :
         map_->cell(static_cast<std::size_t>(module_index_),
                    static_cast<std::size_t>(coord_.replica.value), static_cast<std::size_t>(j)))
      ids.push_back(map_->samples[idx].id);
    return ids;
  }
  matrix read(std::span<const double> buf, std::int64_t row, int rows) const {
    const auto D = static_cast<std::int64_t>(c_.model_dim);
    disttrain::ensure((row + rows) * D <= static_cast<std::int64_t>(buf.size()), "bound_host",
                      "rows beyond the input buffer");
    return Eigen::Map<const rm_matrix>(buf.data() + row * D, rows, D);
  }
  std::int64_t write(std::span<double> buf, std::int64_t row, const matrix& m) const {
    const auto D = static_cast<std::int64_t>(c_.model_dim);
    disttrain::ensure((row + m.rows()) * D <= static_cast<std::int64_t>(buf.size()), "bound_host",
                      "rows beyond the output buffer");
    Eigen::Map<rm_matrix>(buf.data() + row * D, m.rows(), D) = m;
    return row + m.rows();
  }
  // Field 1 ("text") of one sample at token `at` of op's buffers: returns
  // the received tokens (or `own` where nothing is received: the encoder)
  // and writes them to the output where the stage has one.
  std::vector<int> pass_text(const disttrain::schedule_op& op, std::int64_t& at,
                             const std::vector<int>& own) {
    const auto x = buf_.input(op.microbatch, op.chunk, 1);
    const auto y = buf_.output(op.microbatch, op.chunk, 1);
    const auto n = static_cast<std::int64_t>(own.size());
    std::vector<int> text = own;
    if (!x.empty()) {
      disttrain::ensure(at + n <= static_cast<std::int64_t>(x.size()), "bound_host",
                        "text beyond the input buffer");
      for (std::int64_t t = 0; t < n; ++t)
        text[static_cast<std::size_t>(t)] = static_cast<int>(x[static_cast<std::size_t>(at + t)]);
    }
    if (!y.empty()) {
      disttrain::ensure(at + n <= static_cast<std::int64_t>(y.size()), "bound_host",
                        "text beyond the output buffer");
      for (std::int64_t t = 0; t < n; ++t)
        y[static_cast<std::size_t>(at + t)] =
            static_cast<double>(text[static_cast<std::size_t>(t)]);
    }
    at += n;
    return text;
  }
  // The field of the first encoder's forwarded tokens (after "text" if carried).
  [[nodiscard]] std::size_t forwarded_field() const { return text_ ? 2 : 1; }
  backbone_stage& chunk(const disttrain::schedule_op& op) {
    return bb_.at(static_cast<std::size_t>(op.chunk));
  }
  void weight_of(const disttrain::schedule_op& op, std::uint64_t id) {
    if (!enc_.empty())
      enc_.front().backward_weight(id);
    else if (!bb_.empty())
      chunk(op).backward_weight(id);
    else
      gen_.front().backward_weight(id);
  }

  config c_;
  disttrain::topology_coord coord_;
  disttrain::module_role role_;
  int module_index_ = 0;
  bool first_stage_ = false, split_ = false, text_ = false;
  bool forwards_ = false;  // a second encoder: forwards the first one's tokens
  bool sums_ = false;      // two encoders own ranks: the backbone adds their tokens
  std::vector<encoder> enc_;
  std::vector<backbone_stage> bb_;
  std::vector<generator> gen_;
  std::vector<adam> optimizers_;  // per part
  const disttrain::reorder_result* map_ = nullptr;
  disttrain::activation_buffers<double> buf_;
  std::map<std::uint64_t, sample> samples_;
  sample_fetch fetch_;
  std::vector<std::vector<double>> buckets_;
  std::vector<std::size_t> bucket_of_;  // parameter -> bucket
  std::map<std::string, matrix> last_grads_;
  double loss_ = 0.0;
};
static_assert(disttrain::exec_host<bound_host>);

}  // namespace tiny_mllm
