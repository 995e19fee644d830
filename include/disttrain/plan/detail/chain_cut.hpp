#pragma once
/// @file chain_cut.hpp
/// @brief Internal: which of a model's data edges each link of its pipeline
/// carries, and what those links cost (shared by `evaluate`, the planner and
/// `simulate_plan`, so all three price the same bytes).
///
/// The pipeline is a chain: the modules that own ranks in model order
/// (encoders, the backbone, generators), a colocated encoder inside the
/// backbone's first stage, a colocated generator inside its last. A data edge
/// `u -> v` (`model_spec::edges`) whose ends are not neighbours in the chain
/// is carried by every link between them: the modules in between forward it
/// (and its gradient back). Two encoders feeding the backbone run as
/// `E1 -> E2 -> backbone`: the link E1 -> E2 and E2's own stage-to-stage hops
/// carry E1's output, the link E2 -> backbone carries both outputs. With one
/// encoder and one generator every link carries exactly one edge, as before.
///
/// Positions: owning module number c (in chain order) sits at 4c, a colocated
/// encoder at 4b - 1 and a colocated generator at 4b + 1 (b: the backbone's
/// number). An edge crosses the point x iff pos(u) < x < pos(v); the link
/// after owning module c is the point 4c + 2, its own hops the point 4c.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "disttrain/core/check.hpp"
#include "disttrain/cost/cost_model.hpp"
#include "disttrain/cost/stage.hpp"
#include "disttrain/model/model_spec.hpp"
#include "disttrain/model/workload.hpp"

namespace disttrain::detail {

/// @brief 2 when module `i` runs a backward pass (gradients flow back over
/// its input edges and between its stages), else 1.
[[nodiscard]] inline double transfer_directions(const model_spec& m, std::size_t i) {
  return m.runs_backward(i) ? 2.0 : 1.0;
}

/// @brief Bytes one replica moves over a link per microbatch: forward, and
/// backward when a gradient flows back at all (`backward_pass`).
struct link_load {
  double forward = 0;
  double backward = 0;
  bool backward_pass = false;
};

/// @brief The data edges each link of a model's chain carries (file comment).
class chain_cut {
 public:
  /// @brief The chain of `m` with module i colocated iff bit i of `colocated` is set.
  chain_cut(const model_spec& m, std::uint32_t colocated) : edges_(m.edges()) {
    require(edges_.size() <= 64, "model.connections", "has ", edges_.size(),
            " edges, at most 64 are supported");
    const std::size_t bi = m.backbone_index();
    int c = 0, cb = 0;
    for (std::size_t i = 0; i < m.modules.size(); ++i)
      if (!((colocated >> i) & 1U)) {
        if (i == bi) cb = c;
        owner_.push_back(c++);
      } else {
        owner_.push_back(-1);
      }
    pos_.resize(m.modules.size());
    for (std::size_t i = 0; i < m.modules.size(); ++i)
      pos_[i] = owner_[i] >= 0 ? 4 * owner_[i] : (i < bi ? 4 * cb - 1 : 4 * cb + 1);
    for (const connection& e : edges_) grad_.push_back(m.runs_backward(e.from));
  }

  /// @brief Edges (bit e: `edges()[e]`) on the link from owning module `i`'s
  /// last stage to the next owning module's first stage.
  [[nodiscard]] std::uint64_t after(std::size_t i) const { return crossing(4 * owner(i) + 2); }
  /// @brief Edges forwarded through owning module `i`'s stage-to-stage hops.
  [[nodiscard]] std::uint64_t through(std::size_t i) const { return crossing(4 * owner(i)); }
  /// @brief The model's data edges.
  [[nodiscard]] const std::vector<connection>& edges() const noexcept { return edges_; }
  /// @brief Whether edge `e`'s gradient flows back (its source runs a backward pass).
  [[nodiscard]] bool grad(std::size_t e) const noexcept { return grad_[e] != 0; }

  /// @brief What `edges` weigh for `k` samples of `per_sample` (each edge's
  /// bytes by `transfer_bytes`, summed in edge order).
  template <cost_model C>
  [[nodiscard]] link_load load(const C& c, std::uint64_t edges, const model_workload& per_sample,
                               int k) const {
    link_load x;
    if (edges == 0) return x;
    const model_workload w = per_sample * static_cast<double>(k);
    for (std::size_t e = 0; e < edges_.size(); ++e) {
      if (!((edges >> e) & 1U)) continue;
      const double b = c.transfer_bytes(edges_[e].from, edges_[e].to, w);
      x.forward += b;
      if (grad(e)) {
        x.backward += b;
        x.backward_pass = true;
      }
    }
    return x;
  }

 private:
  [[nodiscard]] int owner(std::size_t i) const {
    require(owner_[i] >= 0, "plan.modules", "module ", i, " is colocated and owns no link");
    return owner_[i];
  }
  [[nodiscard]] std::uint64_t crossing(int x) const {
    std::uint64_t out = 0;
    for (std::size_t e = 0; e < edges_.size(); ++e)
      if (pos_[edges_[e].from] < x && x < pos_[edges_[e].to]) out |= std::uint64_t{1} << e;
    return out;
  }

  std::vector<connection> edges_;
  std::vector<int> owner_;  // chain number of an owning module, -1 if colocated
  std::vector<int> pos_;
  std::vector<char> grad_;
};

/// @brief Seconds one replica's `x` takes over a link, each TP rank sending
/// 1/tp of it over NVLink iff `same_node`: forward, plus backward when a
/// gradient flows back; 0 for an empty link.
template <cost_model C>
[[nodiscard]] double load_time(const C& c, const link_load& x, int tp, bool same_node) {
  const double f = c.p2p_time(x.forward / static_cast<double>(tp), same_node);
  return x.backward_pass ? f + c.p2p_time(x.backward / static_cast<double>(tp), same_node) : f;
}

/// @brief A link between two modules per microbatch: the busier of the two
/// sides (`a`: the sender's replica and TP degree, `b`: the receiver's), 0
/// when the link carries no edge.
template <cost_model C>
[[nodiscard]] double link_time(const C& c, std::uint64_t edges, const link_load& a, int tp_a,
                               const link_load& b, int tp_b, bool same_node) {
  if (edges == 0) return 0.0;
  const double ta = load_time(c, a, tp_a, same_node);
  const double tb = load_time(c, b, tp_b, same_node);
  return ta < tb ? tb : ta;
}

/// @brief Transfer from a stage to the next stage of its module per
/// microbatch: its output (`stage_output_bytes`, both ways when the module
/// runs a backward pass, `dirs` 2) plus the edges it forwards (`pass`), each
/// TP rank 1/tp of it, over NVLink iff `same_node`.
template <cost_model C>
[[nodiscard]] double hop_time(const C& c, const stage_config& s, const module_workload& w,
                              bool same_node, double dirs, const link_load& pass = {}) {
  const double own = c.stage_output_bytes(s, w);
  const bool back = dirs > 1.0;
  const link_load x{own + pass.forward, (back ? own : 0.0) + pass.backward,
                    back || pass.backward_pass};
  return load_time(c, x, s.tp, same_node);
}

}  // namespace disttrain::detail
