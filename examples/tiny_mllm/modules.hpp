#pragma once
/// @file modules.hpp
/// @brief The three modules of the tiny multimodal model, forward and backward
/// by hand (Eigen, double precision):
///
/// - **encoder**: per patch `H = tanh(X W1 + b1)`, mean over an image's patches,
///   projector `tok = mean(H) Wp + bp`: one backbone token per image (with
///   `config::encoders` 2, a second encoder's tokens are added to them).
/// - **backbone stage** (layers [first, last) of a residual stack): stage 0
///   builds the sequence `[image tokens; embed(text)]`; each layer is
///   `h' = h + tanh(h W + (M h) U + b)` with `M` the causal prefix mean (a
///   token mixer with a one-line backward: `M^T` is a suffix sum); the last
///   stage adds the LM loss: the position before each text token predicts it
///   (cross-entropy, head `Wo, bo`).
/// - **generator**: pools the backbone output, `q = tanh(p W1 + b1)`,
///   `pred = q W2 + b2`, loss `0.5 |pred - target|^2`.
///
/// Every loss is multiplied by `loss_scale` (1 / global batch size), so the
/// gradient of a global batch is a plain sum over samples: any split into
/// replicas and microbatches, in any order, sums to the same gradient (up to
/// floating-point summation order).
///
/// Backward is split like zero-bubble schedules split it: `backward_input`
/// (B) returns the gradient the upstream module or stage needs and stashes
/// what `backward_weight` (W) needs to accumulate the parameter gradients.
/// Activations are cached per sample key between forward and backward.

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "data.hpp"
#include "tensor.hpp"

namespace tiny_mllm {

namespace detail {
/// Finds the cache entry of `key` or throws naming the module.
template <class Map>
auto& cache_at(Map& m, std::uint64_t key, const char* module) {
  auto it = m.find(key);
  if (it == m.end())
    disttrain::fail(disttrain::errc::invalid_argument, module, "no forward activations for sample ",
                    key, " (backward before forward, or twice)");
  return it->second;
}
/// Throws unless `key` has no cached activations (each sample once per iteration).
template <class Map>
void require_fresh(const Map& m, std::uint64_t key, const char* module) {
  if (m.find(key) != m.end())
    disttrain::fail(disttrain::errc::invalid_argument, module, "sample ", key,
                    " forwarded twice before its backward");
}
/// (M h)_i = mean_{j <= i} h_j (causal prefix mean over rows).
inline matrix prefix_mean(const matrix& h) {
  matrix z(h.rows(), h.cols());
  row_vector acc = row_vector::Zero(h.cols());
  for (Eigen::Index i = 0; i < h.rows(); ++i) {
    acc += h.row(i);
    z.row(i) = acc / static_cast<double>(i + 1);
  }
  return z;
}
/// (M^T g)_j = sum_{i >= j} g_i / (i + 1).
inline matrix prefix_mean_transpose(const matrix& g) {
  matrix out(g.rows(), g.cols());
  row_vector acc = row_vector::Zero(g.cols());
  for (Eigen::Index i = g.rows() - 1; i >= 0; --i) {
    acc += g.row(i) / static_cast<double>(i + 1);
    out.row(i) = acc;
  }
  return out;
}
}  // namespace detail

/// @brief Image encoder: images of a sample -> one token per image.
class encoder {
 public:
  /// @brief The encoder whose parameters are named `name`.w1 ... (`enc`;
  /// `enc2` for a second encoder: other names, other initial values).
  explicit encoder(const config& c, const std::string& name = "enc")
      : c_(c),
        params_{make_param(name + ".w1", c.patch_dim, c.enc_hidden, 0.6, c.init_seed),
                make_param(name + ".b1", 1, c.enc_hidden, 0.1, c.init_seed),
                make_param(name + ".wp", c.enc_hidden, c.model_dim, 0.6, c.init_seed),
                make_param(name + ".bp", 1, c.model_dim, 0.1, c.init_seed)} {}

  [[nodiscard]] std::span<param_tensor> params() { return params_; }
  [[nodiscard]] std::span<const param_tensor> params() const { return params_; }

  /// @brief Tokens (num_images x model_dim) of the sample's images.
  matrix forward(std::uint64_t key, const std::vector<matrix>& images) {
    detail::require_fresh(cache_, key, "encoder");
    const matrix& w1 = params_[0].value;
    const matrix& wp = params_[2].value;
    entry e;
    e.images = images;
    e.pooled = matrix(static_cast<Eigen::Index>(images.size()), c_.enc_hidden);
    for (std::size_t i = 0; i < images.size(); ++i) {
      disttrain::require(images[i].cols() == c_.patch_dim && images[i].rows() > 0, "encoder",
                         "image ", i, " of sample ", key, " has shape ", images[i].rows(), "x",
                         images[i].cols());
      matrix h = ((images[i] * w1).rowwise() + params_[1].value.row(0)).array().tanh().matrix();
      e.pooled.row(static_cast<Eigen::Index>(i)) = h.colwise().mean();
      e.hidden.push_back(std::move(h));
    }
    matrix tokens = (e.pooled * wp).rowwise() + params_[3].value.row(0);
    cache_[key] = std::move(e);
    return tokens;
  }

  /// @brief B: the encoder is the first module, nothing upstream needs a
  /// gradient; stashes `d_tokens` for W.
  void backward_input(std::uint64_t key, const matrix& d_tokens) {
    entry& e = detail::cache_at(cache_, key, "encoder");
    disttrain::require(d_tokens.rows() == e.pooled.rows() && d_tokens.cols() == c_.model_dim,
                       "encoder", "gradient for sample ", key, " has shape ", d_tokens.rows(), "x",
                       d_tokens.cols(), ", expected ", e.pooled.rows(), "x", c_.model_dim);
    e.d_tokens = d_tokens;
  }

  /// @brief W: accumulates the parameter gradients of sample `key`.
  void backward_weight(std::uint64_t key) {
    entry& e = detail::cache_at(cache_, key, "encoder");
    params_[2].grad += e.pooled.transpose() * e.d_tokens;
    params_[3].grad += e.d_tokens.colwise().sum();
    const matrix d_pooled = e.d_tokens * params_[2].value.transpose();
    for (std::size_t i = 0; i < e.images.size(); ++i) {
      const matrix& h = e.hidden[i];
      const double inv_n = 1.0 / static_cast<double>(h.rows());
      matrix da = (1.0 - h.array().square()).matrix();
      da.array().rowwise() *= (d_pooled.row(static_cast<Eigen::Index>(i)) * inv_n).array();
      params_[0].grad += e.images[i].transpose() * da;
      params_[1].grad += da.colwise().sum();
    }
    cache_.erase(key);
  }

  [[nodiscard]] std::size_t pending() const { return cache_.size(); }

 private:
  struct entry {
    std::vector<matrix> images, hidden;
    matrix pooled, d_tokens;
  };
  config c_;
  std::vector<param_tensor> params_;
  std::map<std::uint64_t, entry> cache_;
};

/// @brief Backbone layers [first, last); stage 0 embeds, the last stage holds the LM head.
class backbone_stage {
 public:
  /// @brief Output of a stage's forward: hidden states and (last stage) the scaled LM loss.
  struct output {
    matrix hidden;
    double loss = 0.0;
  };

  backbone_stage(const config& c, int first_layer, int last_layer)
      : c_(c), first_(first_layer), last_(last_layer) {
    disttrain::require(0 <= first_layer && first_layer < last_layer && last_layer <= c.layers,
                       "backbone_stage", "layers [", first_layer, ", ", last_layer,
                       ") not a non-empty range of [0, ", c.layers, ")");
    if (is_first())
      params_.push_back(make_param("bb.embed", c.vocab, c.model_dim, 0.6, c.init_seed));
    for (int l = first_; l < last_; ++l) {
      const std::string p = "bb.l" + std::to_string(l);
      params_.push_back(make_param(p + ".w", c.model_dim, c.model_dim, 0.3, c.init_seed));
      params_.push_back(make_param(p + ".u", c.model_dim, c.model_dim, 0.3, c.init_seed));
      params_.push_back(make_param(p + ".b", 1, c.model_dim, 0.1, c.init_seed));
    }
    if (is_last()) {
      params_.push_back(make_param("bb.head.w", c.model_dim, c.vocab, 0.6, c.init_seed));
      params_.push_back(make_param("bb.head.b", 1, c.vocab, 0.1, c.init_seed));
    }
  }

  [[nodiscard]] bool is_first() const { return first_ == 0; }
  [[nodiscard]] bool is_last() const { return last_ == c_.layers; }
  [[nodiscard]] std::span<param_tensor> params() { return params_; }
  [[nodiscard]] std::span<const param_tensor> params() const { return params_; }
  void set_loss_scale(double s) { scale_ = s; }

  /// @brief Stage 0: `x` = image tokens (num_images x dim); later stages: the
  /// hidden states (seq_len x dim). `text` is the sample's text.
  output forward(std::uint64_t key, const matrix& x, std::span<const int> text) {
    detail::require_fresh(cache_, key, "backbone_stage");
    entry e;
    e.num_images = static_cast<int>(x.rows());
    e.text.assign(text.begin(), text.end());
    matrix h;
    if (is_first()) {
      check_shape(x, x.rows(), "image tokens of sample", key);
      h.resize(x.rows() + static_cast<Eigen::Index>(text.size()), c_.model_dim);
      h.topRows(x.rows()) = x;
      const matrix& emb = params_[0].value;
      for (std::size_t t = 0; t < text.size(); ++t) {
        disttrain::require(text[t] >= 0 && text[t] < c_.vocab, "backbone_stage", "token ", text[t],
                           " of sample ", key, " outside the vocabulary of ", c_.vocab);
        h.row(x.rows() + static_cast<Eigen::Index>(t)) = emb.row(text[t]);
      }
    } else {
      h = x;
      e.num_images = static_cast<int>(x.rows()) - static_cast<int>(text.size());
    }
    check_shape(h, h.rows(), "hidden of sample", key);
    for (int l = first_; l < last_; ++l) {
      const std::size_t k = layer_index(l);
      layer_cache lc;
      lc.h = h;
      lc.z = detail::prefix_mean(h);
      lc.y = ((h * params_[k].value + lc.z * params_[k + 1].value).rowwise() +
              params_[k + 2].value.row(0))
                 .array()
                 .tanh()
                 .matrix();
      h += lc.y;
      e.layers.push_back(std::move(lc));
    }
    output out;
    if (is_last()) out.loss = lm_forward(h, e);
    e.out = h;
    out.hidden = h;
    cache_[key] = std::move(e);
    return out;
  }

  /// @brief B: gradient w.r.t. the stage input (stage 0: w.r.t. the image
  /// tokens). `d_out` is the gradient w.r.t. the stage output (the last
  /// stage: from the generator; its own LM gradient is added here).
  matrix backward_input(std::uint64_t key, const matrix& d_out) {
    entry& e = detail::cache_at(cache_, key, "backbone_stage");
    disttrain::require(d_out.rows() == e.out.rows() && d_out.cols() == c_.model_dim,
                       "backbone_stage", "output gradient of sample ", key, " has shape ",
                       d_out.rows(), "x", d_out.cols(), ", expected ", e.out.rows(), "x",
                       c_.model_dim);
    matrix dh = d_out;
    if (is_last()) {
      const matrix& wo = params_[params_.size() - 2].value;
      for (Eigen::Index t = 0; t < e.d_logits.rows(); ++t)
        dh.row(e.num_images - 1 + t) += e.d_logits.row(t) * wo.transpose();
    }
    for (int l = last_ - 1; l >= first_; --l) {
      const std::size_t k = layer_index(l);
      layer_cache& lc = e.layers[static_cast<std::size_t>(l - first_)];
      lc.g = (dh.array() * (1.0 - lc.y.array().square())).matrix();
      dh += lc.g * params_[k].value.transpose() +
            detail::prefix_mean_transpose(lc.g * params_[k + 1].value.transpose());
    }
    if (!is_first()) return dh;
    e.d_embed = dh.bottomRows(static_cast<Eigen::Index>(e.text.size()));
    return dh.topRows(e.num_images);
  }

  /// @brief W: accumulates the parameter gradients of sample `key`.
  void backward_weight(std::uint64_t key) {
    entry& e = detail::cache_at(cache_, key, "backbone_stage");
    disttrain::require(e.layers.empty() || e.layers.front().g.size() > 0, "backbone_stage",
                       "weight gradient of sample ", key, " before its input gradient");
    for (int l = first_; l < last_; ++l) {
      const std::size_t k = layer_index(l);
      const layer_cache& lc = e.layers[static_cast<std::size_t>(l - first_)];
      params_[k].grad += lc.h.transpose() * lc.g;
      params_[k + 1].grad += lc.z.transpose() * lc.g;
      params_[k + 2].grad += lc.g.colwise().sum();
    }
    if (is_first())
      for (std::size_t t = 0; t < e.text.size(); ++t)
        params_[0].grad.row(e.text[t]) += e.d_embed.row(static_cast<Eigen::Index>(t));
    if (is_last()) {
      param_tensor& wo = params_[params_.size() - 2];
      param_tensor& bo = params_[params_.size() - 1];
      for (Eigen::Index t = 0; t < e.d_logits.rows(); ++t) {
        wo.grad += e.out.row(e.num_images - 1 + t).transpose() * e.d_logits.row(t);
        bo.grad += e.d_logits.row(t);
      }
    }
    cache_.erase(key);
  }

  [[nodiscard]] std::size_t pending() const { return cache_.size(); }

 private:
  struct layer_cache {
    matrix h, z, y, g;
  };
  struct entry {
    int num_images = 0;
    std::vector<int> text;
    std::vector<layer_cache> layers;
    matrix out, d_logits, d_embed;
  };

  [[nodiscard]] std::size_t layer_index(int l) const {
    return static_cast<std::size_t>((is_first() ? 1 : 0) + 3 * (l - first_));
  }
  void check_shape(const matrix& m, Eigen::Index rows, const char* what, std::uint64_t key) const {
    disttrain::require(m.rows() == rows && m.cols() == c_.model_dim && rows > 0, "backbone_stage",
                       what, " ", key, " has shape ", m.rows(), "x", m.cols(), ", expected ", rows,
                       "x", c_.model_dim);
  }

  /// Cross-entropy of each text token predicted from the position before it.
  double lm_forward(const matrix& h, entry& e) {
    disttrain::require(e.num_images >= 1, "backbone_stage",
                       "a sample needs at least one image token");
    const matrix& wo = params_[params_.size() - 2].value;
    const matrix& bo = params_[params_.size() - 1].value;
    const auto T = static_cast<Eigen::Index>(e.text.size());
    e.d_logits.resize(T, c_.vocab);
    double loss = 0.0;
    for (Eigen::Index t = 0; t < T; ++t) {
      row_vector logits = h.row(e.num_images - 1 + t) * wo + bo.row(0);
      const double mx = logits.maxCoeff();
      row_vector p = (logits.array() - mx).exp().matrix();
      const double z = p.sum();
      p /= z;
      const int y = e.text[static_cast<std::size_t>(t)];
      loss -= (logits(y) - mx) - std::log(z);
      p(y) -= 1.0;
      e.d_logits.row(t) = scale_ * p;
    }
    return scale_ * loss;
  }

  config c_;
  int first_, last_;
  double scale_ = 1.0;
  std::vector<param_tensor> params_;
  std::map<std::uint64_t, entry> cache_;
};

/// @brief Generator head: pooled backbone output -> predicted image latent (MSE).
class generator {
 public:
  explicit generator(const config& c)
      : c_(c),
        params_{make_param("gen.w1", c.model_dim, c.gen_hidden, 0.6, c.init_seed),
                make_param("gen.b1", 1, c.gen_hidden, 0.1, c.init_seed),
                make_param("gen.w2", c.gen_hidden, c.latent_dim, 0.6, c.init_seed),
                make_param("gen.b2", 1, c.latent_dim, 0.1, c.init_seed)} {}

  [[nodiscard]] std::span<param_tensor> params() { return params_; }
  [[nodiscard]] std::span<const param_tensor> params() const { return params_; }
  void set_loss_scale(double s) { scale_ = s; }

  /// @brief Scaled loss of sample `key` from the backbone output `hidden`.
  double forward(std::uint64_t key, const matrix& hidden, const row_vector& target) {
    disttrain::require(hidden.rows() > 0 && hidden.cols() == c_.model_dim, "generator",
                       "hidden of sample ", key, " has shape ", hidden.rows(), "x", hidden.cols());
    disttrain::require(target.size() == c_.latent_dim, "generator", "target of sample ", key,
                       " has ", target.size(), " values, expected ", c_.latent_dim);
    detail::require_fresh(cache_, key, "generator");
    entry e;
    e.rows = hidden.rows();
    e.pooled = hidden.colwise().mean();
    e.q = ((e.pooled * params_[0].value) + params_[1].value.row(0)).array().tanh().matrix();
    const row_vector diff = e.q * params_[2].value + params_[3].value.row(0) - target;
    e.d_pred = scale_ * diff;
    cache_[key] = std::move(e);
    return scale_ * 0.5 * diff.squaredNorm();
  }

  /// @brief B: gradient w.r.t. the backbone output (rows x dim).
  matrix backward_input(std::uint64_t key) {
    entry& e = detail::cache_at(cache_, key, "generator");
    e.d_a =
        ((e.d_pred * params_[2].value.transpose()).array() * (1.0 - e.q.array().square())).matrix();
    const row_vector d_pooled = e.d_a * params_[0].value.transpose() / static_cast<double>(e.rows);
    return d_pooled.replicate(e.rows, 1);
  }

  /// @brief W: accumulates the parameter gradients of sample `key`.
  void backward_weight(std::uint64_t key) {
    entry& e = detail::cache_at(cache_, key, "generator");
    disttrain::require(e.d_a.size() > 0, "generator", "weight gradient of sample ", key,
                       " before its input gradient");
    params_[0].grad += e.pooled.transpose() * e.d_a;
    params_[1].grad += e.d_a;
    params_[2].grad += e.q.transpose() * e.d_pred;
    params_[3].grad += e.d_pred;
    cache_.erase(key);
  }

  [[nodiscard]] std::size_t pending() const { return cache_.size(); }

 private:
  struct entry {
    Eigen::Index rows = 0;
    row_vector pooled, q, d_pred, d_a;
  };
  config c_;
  double scale_ = 1.0;
  std::vector<param_tensor> params_;
  std::map<std::uint64_t, entry> cache_;
};

}  // namespace tiny_mllm
