#pragma once
/// @file rng.hpp
/// @brief A small, fully specified pseudo-random generator (SplitMix64).
///
/// `std::` distributions are implementation-defined, so two standard libraries
/// draw different values from the same seed. disttrain samples data with its
/// own generator and its own transforms, so every rank and every platform draws
/// the same batch from the same seed.

#include <cstdint>

namespace disttrain {

/// @brief SplitMix64 (Steele, Lea, Flood 2014): 64-bit state, one add, two
/// xor-shift-multiplies per draw; passes BigCrush; random access by seeding.
///
/// @snippet model.cpp splitmix64
class splitmix64 {
 public:
  /// @brief Seeds the generator; equal seeds give equal sequences everywhere.
  constexpr explicit splitmix64(std::uint64_t seed = 0) noexcept : state_(seed) {}

  /// @brief Next 64 random bits.
  constexpr std::uint64_t next() noexcept {
    state_ += 0x9E3779B97F4A7C15ULL;
    return mix(state_);
  }

  /// @brief A double in [0, 1) built from the top 53 bits: `(next() >> 11) * 2^-53`.
  constexpr double uniform01() noexcept { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  /// @brief An integer in [0, n), exactly uniform: draws `x` until
  /// `x >= 2^64 mod n`, then returns `x % n`. Returns 0 when n == 0.
  constexpr std::uint64_t below(std::uint64_t n) noexcept {
    if (n == 0) return 0;
    const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const std::uint64_t x = next();
      if (x >= threshold) return x % n;
    }
  }

  /// @brief The SplitMix64 output function (a bijective 64-bit mixer); also a
  /// good hash to derive independent seeds: `mix(seed ^ mix(id))`.
  static constexpr std::uint64_t mix(std::uint64_t z) noexcept {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }

  /// @brief Current state (to save and restore a stream).
  [[nodiscard]] constexpr std::uint64_t state() const noexcept { return state_; }

 private:
  std::uint64_t state_;
};

/// @brief Seed of the independent stream number `stream` of `seed`
/// (used to give sample `id` its own stream: random access, order-independent).
[[nodiscard]] constexpr std::uint64_t derive_seed(std::uint64_t seed,
                                                  std::uint64_t stream) noexcept {
  return splitmix64::mix(seed ^ splitmix64::mix(stream + 0x632BE59BD9B4E019ULL));
}

}  // namespace disttrain
