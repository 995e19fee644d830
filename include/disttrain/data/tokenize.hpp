#pragma once
/// @file tokenize.hpp
/// @brief A small deterministic text tokenizer for the preprocessing
/// examples, tests and benchmarks: lower-cased words and single punctuation
/// marks, each hashed (FNV-1a) into a fixed vocabulary, between BOS and EOS.
/// Real CPU work of the right shape (a pass over the text, one hash per
/// token) without a vocabulary file; plug a real tokenizer into your own
/// `sample_source` for training.
///
/// @snippet data.cpp tokenize

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain {

/// @brief Settings of a `hash_tokenizer`.
struct tokenizer_config {
  std::int32_t vocab = 32000;     ///< ids in [0, vocab); 0..2 are PAD, BOS, EOS
  std::size_t max_tokens = 2048;  ///< longer texts are truncated (EOS kept)
};

/// @brief Deterministic hashed word tokenizer (see the file docs).
class hash_tokenizer {
 public:
  static constexpr std::int32_t pad = 0, bos = 1, eos = 2;

  explicit hash_tokenizer(tokenizer_config cfg = {}) : cfg_(cfg) {
    require(cfg_.vocab > 3, "tokenizer_config.vocab", "must be > 3, got ", cfg_.vocab);
    require(cfg_.max_tokens >= 3, "tokenizer_config.max_tokens", "must be >= 3, got ",
            cfg_.max_tokens);
  }

  /// @brief BOS, the tokens of `text`, EOS. Throws `errc::invalid_argument`
  /// at `where` if `text` holds no token (empty or only spaces).
  [[nodiscard]] std::vector<std::int32_t> encode(std::string_view text,
                                                 std::string_view where = "text") const {
    std::vector<std::int32_t> out{bos};
    std::uint64_t h = offset;
    bool in_word = false;
    auto flush = [&] {
      if (in_word && out.size() + 1 < cfg_.max_tokens) out.push_back(to_id(h));
      h = offset;
      in_word = false;
    };
    for (char ch : text) {
      const auto c = static_cast<unsigned char>(ch);
      if (std::isalnum(c) != 0 || c >= 0x80) {
        h = (h ^ static_cast<std::uint64_t>(std::tolower(c))) * prime;
        in_word = true;
      } else {
        flush();
        if (std::isspace(c) == 0) {  // punctuation: a token of its own
          h = (offset ^ c) * prime;
          in_word = true;
          flush();
        }
      }
    }
    flush();
    require(out.size() > 1, where, "empty text: no token in ", text.size(), " characters");
    out.push_back(eos);
    return out;
  }

  [[nodiscard]] const tokenizer_config& config() const noexcept { return cfg_; }

 private:
  static constexpr std::uint64_t offset = 14695981039346656037ULL, prime = 1099511628211ULL;
  [[nodiscard]] std::int32_t to_id(std::uint64_t h) const {
    return static_cast<std::int32_t>(3 + h % static_cast<std::uint64_t>(cfg_.vocab - 3));
  }
  tokenizer_config cfg_;
};

}  // namespace disttrain
