#pragma once
/// @file serial.hpp
/// @brief The single-process reference: the whole tiny model on one thread,
/// the whole global batch in order, then one optimizer step. The distributed
/// example must reproduce its gradients (tests/exec/test_tiny_mllm_equivalence.cpp).
///
/// @code
/// tiny_mllm::serial_trainer t(tiny_mllm::config{});
/// std::vector<tiny_mllm::sample> batch = ...;
/// double loss = t.compute_gradients(batch);   // grads of (1/N) sum of losses
/// t.step();                                    // Adam
/// @endcode

#include <algorithm>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "data.hpp"
#include "modules.hpp"
#include "tensor.hpp"

namespace tiny_mllm {

/// @brief The whole model in one process.
class serial_trainer {
 public:
  explicit serial_trainer(const config& c, adam::settings opt = {})
      : enc_(c), bb_(c, 0, c.layers), gen_(c), opt_enc_(opt), opt_bb_(opt), opt_gen_(opt) {
    disttrain::require(c.encoders == 1 || c.encoders == 2, "config.encoders", "is 1 or 2, got ",
                       c.encoders);
    if (c.encoders == 2) {
      enc2_.emplace_back(c, "enc2");
      opt_enc2_.emplace_back(opt);
    }
  }

  /// @brief Zeroes the gradients, runs forward and backward over every sample
  /// of `batch` with loss scale 1/batch.size(), and returns the batch loss.
  double compute_gradients(std::span<const sample> batch) {
    disttrain::require(!batch.empty(), "serial_trainer", "empty batch");
    const double scale = 1.0 / static_cast<double>(batch.size());
    zero_grads(enc_.params());
    for (encoder& e : enc2_) zero_grads(e.params());
    zero_grads(bb_.params());
    zero_grads(gen_.params());
    bb_.set_loss_scale(scale);
    gen_.set_loss_scale(scale);
    double loss = 0.0;
    for (const sample& s : batch) {
      const std::uint64_t k = s.meta.id;
      matrix tokens = enc_.forward(k, s.images);
      for (encoder& e : enc2_) tokens = e.forward(k, s.images) + tokens;
      auto out = bb_.forward(k, tokens, s.text);
      loss += out.loss + gen_.forward(k, out.hidden, s.target);
      const matrix d_hidden = gen_.backward_input(k);
      gen_.backward_weight(k);
      const matrix d_tokens = bb_.backward_input(k, d_hidden);
      bb_.backward_weight(k);
      enc_.backward_input(k, d_tokens);
      enc_.backward_weight(k);
      for (encoder& e : enc2_) {
        e.backward_input(k, d_tokens);
        e.backward_weight(k);
      }
    }
    return loss;
  }

  /// @brief One Adam step on every parameter.
  void step() {
    opt_enc_.step(enc_.params());
    for (std::size_t i = 0; i < enc2_.size(); ++i) opt_enc2_[i].step(enc2_[i].params());
    opt_bb_.step(bb_.params());
    opt_gen_.step(gen_.params());
  }

  /// @brief Every parameter by name (value and gradient).
  [[nodiscard]] std::map<std::string, const param_tensor*> params() const {
    std::map<std::string, const param_tensor*> out;
    for (auto ps : {enc_.params(), bb_.params(), gen_.params()})
      for (const auto& p : ps) out[p.name] = &p;
    for (const encoder& e : enc2_)
      for (const auto& p : e.params()) out[p.name] = &p;
    return out;
  }

  encoder& enc() { return enc_; }
  backbone_stage& backbone() { return bb_; }
  generator& gen() { return gen_; }

 private:
  encoder enc_;
  std::vector<encoder> enc2_;  // the second encoder (config::encoders == 2)
  backbone_stage bb_;
  generator gen_;
  adam opt_enc_, opt_bb_, opt_gen_;
  std::vector<adam> opt_enc2_;
};

/// @brief Largest gradient mismatch of `got` (parameter name -> gradient, a
/// subset of the model) against the serial reference `ref`, each tensor
/// measured as max |got - ref| / (1 + max |ref|). Throws if a name or shape
/// is unknown to the reference.
inline double gradient_mismatch(const std::map<std::string, matrix>& got,
                                const serial_trainer& ref) {
  const auto want = ref.params();
  double worst = 0.0;
  for (const auto& [name, g] : got) {
    auto it = want.find(name);
    disttrain::require(it != want.end(), "gradient_mismatch", "unknown parameter ", name);
    const matrix& w = it->second->grad;
    disttrain::require(g.rows() == w.rows() && g.cols() == w.cols(), "gradient_mismatch", name,
                       " has shape ", g.rows(), "x", g.cols(), ", reference ", w.rows(), "x",
                       w.cols());
    worst = std::max(worst, (g - w).cwiseAbs().maxCoeff() / (1.0 + w.cwiseAbs().maxCoeff()));
  }
  return worst;
}

/// @brief Samples `first .. first + n - 1` (a global batch of consecutive ids).
inline std::vector<sample> make_batch(const config& c, std::uint64_t first, std::size_t n) {
  std::vector<sample> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) out.push_back(make_sample(c, first + i));
  return out;
}

}  // namespace tiny_mllm
