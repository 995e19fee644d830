#pragma once
/// @file tensor.hpp
/// @brief Named parameters, deterministic initialisation and gradient packing
/// for the tiny multimodal model (example code, double precision, Eigen).
///
/// Every parameter is initialised from `(seed, name)` alone, so any subset of
/// the model (one pipeline stage, one module replica) built on any rank holds
/// exactly the values the single-process model holds.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "disttrain/core/check.hpp"

namespace tiny_mllm {

using matrix = Eigen::MatrixXd;
using row_vector = Eigen::RowVectorXd;

/// @brief SplitMix64: a fully specified generator, so every rank and platform
/// draws the same values from the same seed (std distributions are not).
class rng {
 public:
  explicit rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix(state_);
  }
  /// @brief Uniform in [0, 1).
  double uniform01() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
  /// @brief Uniform in [lo, hi).
  double uniform(double lo, double hi) { return lo + (hi - lo) * uniform01(); }
  /// @brief Integer in [lo, hi] (modulo bias is irrelevant for synthetic data).
  int integer(int lo, int hi) {
    return lo + static_cast<int>(next() % static_cast<std::uint64_t>(hi - lo + 1));
  }
  static std::uint64_t mix(std::uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

 private:
  std::uint64_t state_;
};

/// @brief FNV-1a of a name: a deterministic stream id for a parameter.
inline std::uint64_t name_hash(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (char c : s) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  return h;
}

/// @brief One trainable tensor with its accumulated gradient.
struct param_tensor {
  std::string name;
  matrix value;
  matrix grad;
};

/// @brief A tensor of shape rows x cols drawn uniformly from [-scale, scale),
/// determined by (seed, name) only.
inline param_tensor make_param(std::string name, int rows, int cols, double scale,
                               std::uint64_t seed) {
  rng r(rng::mix(seed ^ rng::mix(name_hash(name))));
  param_tensor p{std::move(name), matrix(rows, cols), matrix::Zero(rows, cols)};
  for (Eigen::Index j = 0; j < p.value.cols(); ++j)
    for (Eigen::Index i = 0; i < p.value.rows(); ++i) p.value(i, j) = r.uniform(-scale, scale);
  return p;
}

/// @brief Total number of scalars in `ps`.
inline std::size_t num_scalars(std::span<const param_tensor> ps) {
  std::size_t n = 0;
  for (const auto& p : ps) n += static_cast<std::size_t>(p.value.size());
  return n;
}

/// @brief Sets every gradient to zero.
inline void zero_grads(std::span<param_tensor> ps) {
  for (auto& p : ps) p.grad.setZero();
}

/// @brief Copies the gradients of `ps` into `out` (column-major, in order).
inline void pack_grads(std::span<const param_tensor> ps, std::span<double> out) {
  disttrain::require(out.size() == num_scalars(ps), "tiny_mllm.pack_grads", "buffer holds ",
                     out.size(), " doubles, parameters ", num_scalars(ps));
  std::size_t o = 0;
  for (const auto& p : ps)
    for (Eigen::Index k = 0; k < p.grad.size(); ++k) out[o++] = p.grad.data()[k];
}

/// @brief Overwrites the gradients of `ps` from `in` (inverse of pack_grads).
inline void unpack_grads(std::span<const double> in, std::span<param_tensor> ps) {
  disttrain::require(in.size() == num_scalars(ps), "tiny_mllm.unpack_grads", "buffer holds ",
                     in.size(), " doubles, parameters ", num_scalars(ps));
  std::size_t o = 0;
  for (auto& p : ps)
    for (Eigen::Index k = 0; k < p.grad.size(); ++k) p.grad.data()[k] = in[o++];
}

/// @brief Adam (Kingma & Ba) with bias correction; state per tensor.
///
/// @code
/// tiny_mllm::adam opt({.lr = 1e-2});
/// opt.step(params);   // uses params[i].grad
/// @endcode
class adam {
 public:
  struct settings {
    double lr = 1e-2;
    double beta1 = 0.9;
    double beta2 = 0.999;
    double eps = 1e-8;
  };
  explicit adam(settings s) : s_(s) {}

  void step(std::span<param_tensor> ps) {
    if (m_.empty())
      for (const auto& p : ps) {
        m_.push_back(matrix::Zero(p.value.rows(), p.value.cols()));
        v_.push_back(matrix::Zero(p.value.rows(), p.value.cols()));
      }
    disttrain::require(m_.size() == ps.size(), "tiny_mllm.adam", "state for ", m_.size(),
                       " tensors, got ", ps.size());
    ++t_;
    const double c1 = 1.0 - std::pow(s_.beta1, static_cast<double>(t_));
    const double c2 = 1.0 - std::pow(s_.beta2, static_cast<double>(t_));
    for (std::size_t i = 0; i < ps.size(); ++i) {
      m_[i] = s_.beta1 * m_[i] + (1.0 - s_.beta1) * ps[i].grad;
      v_[i] = s_.beta2 * v_[i] + (1.0 - s_.beta2) * ps[i].grad.cwiseProduct(ps[i].grad);
      ps[i].value.array() -= s_.lr * (m_[i].array() / c1) / ((v_[i].array() / c2).sqrt() + s_.eps);
    }
  }

 private:
  settings s_;
  long t_ = 0;
  std::vector<matrix> m_, v_;
};

}  // namespace tiny_mllm
