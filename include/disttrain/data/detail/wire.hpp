#pragma once
/// @file wire.hpp
/// @brief Byte encoding of the messages between producer ranks and trainers
/// (`data/producer_ranks.hpp`): little fixed-width integers appended to a
/// byte vector, and a reader that throws `errc::comm_error` naming the
/// message when it is truncated or malformed (never reads past the end).

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "disttrain/core/check.hpp"

namespace disttrain::detail {

/// @brief Appends trivially copyable values and byte ranges to `out`.
class byte_writer {
 public:
  explicit byte_writer(std::vector<std::byte>& out) : out_(out) {}

  template <class T>
  requires std::is_trivially_copyable_v<T>
  void put(const T& v) { append(&v, sizeof(T)); }
  /// @brief A length (u64) then the bytes.
  void put_bytes(std::span<const std::byte> bytes) {
    put(static_cast<std::uint64_t>(bytes.size()));
    append(bytes.data(), bytes.size());
  }
  void put_string(std::string_view s) {
    put_bytes(std::as_bytes(std::span<const char>(s.data(), s.size())));
  }

 private:
  // resize + memcpy rather than a range insert: one less template to
  // instantiate in every translation unit (docs/header_cost.md).
  void append(const void* p, std::size_t n) {
    if (n == 0) return;
    const std::size_t old = out_.size();
    out_.resize(old + n);
    std::memcpy(out_.data() + old, p, n);
  }

  std::vector<std::byte>& out_;
};

/// @brief Reads what `byte_writer` wrote; `what` names the message in errors.
class byte_reader {
 public:
  byte_reader(std::span<const std::byte> in, std::string what) : in_(in), what_(std::move(what)) {}

  template <class T>
  requires std::is_trivially_copyable_v<T>
  [[nodiscard]] T get() {
    T v{};
    std::memcpy(&v, take(sizeof(T)).data(), sizeof(T));
    return v;
  }
  [[nodiscard]] std::span<const std::byte> get_bytes() {
    const auto n = get<std::uint64_t>();
    if (n > in_.size() - pos_)
      fail(errc::comm_error, what_, "malformed message: a field of ", n, " bytes at offset ", pos_,
           " exceeds the ", in_.size(), "-byte message");
    return take(static_cast<std::size_t>(n));
  }
  [[nodiscard]] std::string get_string() {
    const auto b = get_bytes();
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  [[nodiscard]] bool done() const noexcept { return pos_ == in_.size(); }
  [[nodiscard]] const std::string& what() const noexcept { return what_; }

 private:
  std::span<const std::byte> take(std::size_t n) {
    if (n > in_.size() - pos_)
      fail(errc::comm_error, what_, "malformed message: truncated at offset ", pos_, " (needs ", n,
           " more bytes, ", in_.size() - pos_, " left)");
    auto s = in_.subspan(pos_, n);
    pos_ += n;
    return s;
  }

  std::span<const std::byte> in_;
  std::string what_;
  std::size_t pos_ = 0;
};

}  // namespace disttrain::detail
