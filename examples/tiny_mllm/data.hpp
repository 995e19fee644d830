#pragma once
/// @file data.hpp
/// @brief Model sizes and synthetic multimodal samples for the tiny model:
/// varying text lengths, image counts and image sizes (patch counts).
///
/// A sample is a pure function of (data seed, sample id), so a producer on any
/// rank prepares the same sample, and its shape metadata (what the reorderer
/// and the communicator routes need) is known before its tensors are built.
///
/// The data are learnable: the text is an arithmetic progression modulo the
/// vocabulary whose step depends on the first image, and the target latent is
/// a fixed nonlinear function of the mean patch; so the loss can fall.

#include <cstdint>
#include <vector>

#include "tensor.hpp"

namespace tiny_mllm {

/// @brief Sizes of the tiny model and of its synthetic data.
struct config {
  int patch_dim = 6;                     ///< scalars per image patch
  int enc_hidden = 8;                    ///< encoder MLP width
  int model_dim = 8;                     ///< backbone width (one token = model_dim scalars)
  int vocab = 7;                         ///< text vocabulary
  int layers = 4;                        ///< backbone layers
  int gen_hidden = 8;                    ///< generator MLP width
  int latent_dim = 3;                    ///< generated image latent
  int min_text = 2, max_text = 6;        ///< text tokens per sample
  int min_images = 1, max_images = 3;    ///< images per sample
  int min_patches = 1, max_patches = 4;  ///< patches per image (image size)
  std::uint64_t data_seed = 7;
  std::uint64_t init_seed = 11;
  /// 1, or 2: a second image encoder ("enc2", its own weights) whose tokens
  /// add to the first one's before the backbone (two encoders feeding it).
  int encoders = 1;
};

/// @brief Shape of one sample: all that routes and costs need.
struct sample_meta {
  std::uint64_t id = 0;
  int text_len = 0;
  std::vector<int> patches;  ///< patches of each image

  [[nodiscard]] int num_images() const { return static_cast<int>(patches.size()); }
  /// @brief Backbone sequence length: one token per image plus the text.
  [[nodiscard]] int seq_len() const { return num_images() + text_len; }
  [[nodiscard]] int total_patches() const {
    int n = 0;
    for (int p : patches) n += p;
    return n;
  }
};

/// @brief One prepared sample.
struct sample {
  sample_meta meta;
  std::vector<int> text;       ///< text_len tokens in [0, vocab)
  std::vector<matrix> images;  ///< image i: patches[i] x patch_dim
  row_vector target;           ///< latent the generator must predict
};

/// @brief The shape of sample `id` (cheap: no tensors).
inline sample_meta make_meta(const config& c, std::uint64_t id) {
  rng r(rng::mix(c.data_seed ^ rng::mix(id + 0x632BE59BD9B4E019ULL)));
  sample_meta m;
  m.id = id;
  m.text_len = r.integer(c.min_text, c.max_text);
  const int n = r.integer(c.min_images, c.max_images);
  for (int i = 0; i < n; ++i) m.patches.push_back(r.integer(c.min_patches, c.max_patches));
  return m;
}

/// @brief Sample `id` with its tensors ("load, decode, tokenize").
inline sample make_sample(const config& c, std::uint64_t id) {
  sample s;
  s.meta = make_meta(c, id);
  rng r(rng::mix(c.data_seed ^ rng::mix(id + 0x2545F4914F6CDD1DULL)));
  for (int p : s.meta.patches) {
    matrix img(p, c.patch_dim);
    for (Eigen::Index j = 0; j < img.cols(); ++j)
      for (Eigen::Index i = 0; i < img.rows(); ++i) img(i, j) = r.uniform(-1.0, 1.0);
    s.images.push_back(std::move(img));
  }
  // Text: progression whose step is set by the sign of the first image's first patch.
  const int step = s.images.front()(0, 0) > 0.0 ? 1 : 2;
  int tok = r.integer(0, c.vocab - 1);
  for (int t = 0; t < s.meta.text_len; ++t) {
    s.text.push_back(tok);
    tok = (tok + step) % c.vocab;
  }
  // Target: tanh of a fixed mix of the mean patch over all images.
  row_vector mean = row_vector::Zero(c.patch_dim);
  for (const auto& img : s.images) mean += img.colwise().sum();
  mean /= static_cast<double>(s.meta.total_patches());
  s.target = row_vector(c.latent_dim);
  for (int k = 0; k < c.latent_dim; ++k) {
    double v = 0.0;
    for (int j = 0; j < c.patch_dim; ++j) v += ((j + k) % 3 == 0 ? 1.5 : -0.5) * mean(j);
    s.target(k) = std::tanh(v);
  }
  return s;
}

}  // namespace tiny_mllm
