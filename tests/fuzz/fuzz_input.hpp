#pragma once
// A little reader over the fuzzer's bytes: integers in ranges, flags, raw
// words. Running out of bytes yields zeros (the input stays meaningful when
// libFuzzer shortens it).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

namespace disttrain::fuzz {

class input {
 public:
  input(const std::uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  [[nodiscard]] std::uint64_t u64() {
    std::uint64_t v = 0;
    const std::size_t n = size_ - pos_ < 8 ? size_ - pos_ : 8;
    if (n > 0) std::memcpy(&v, data_ + pos_, n);
    pos_ += n;
    return v;
  }
  [[nodiscard]] std::uint8_t byte() {
    if (pos_ >= size_) return 0;
    return data_[pos_++];
  }
  // An integer in [lo, hi] (hi - lo < 256).
  [[nodiscard]] int in(int lo, int hi) {
    return lo + static_cast<int>(byte() % static_cast<unsigned>(hi - lo + 1));
  }
  [[nodiscard]] bool flag() { return (byte() & 1u) != 0; }
  [[nodiscard]] std::span<const std::uint8_t> rest() const { return {data_ + pos_, size_ - pos_}; }

 private:
  const std::uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// Stops the fuzzer with a crash when an invariant fails.
inline void expect(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace disttrain::fuzz
