#pragma once
/// @file wire_header.hpp
/// @brief What travels besides the payload: the plan stamp ahead of every
/// message of a route (always), and the verify-mode header (fixed part +
/// piece list) and payload checksum (only with `transfer_options::verify`).

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include "disttrain/comm/plan_stamp.hpp"
#include "disttrain/comm/route.hpp"
#include "disttrain/core/check.hpp"

namespace disttrain::detail {

/// 64-bit checksum of bytes: 8-byte words mixed by multiply-xorshift (not
/// cryptographic; catches corrupted, shifted or misrouted payloads).
[[nodiscard]] inline std::uint64_t checksum64(std::span<const std::byte> data) noexcept {
  std::uint64_t h = 0x9E3779B97F4A7C15ull ^ static_cast<std::uint64_t>(data.size());
  std::size_t i = 0;
  for (; i + 8 <= data.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, data.data() + i, 8);
    h ^= w;
    h *= 0xBF58476D1CE4E5B9ull;
    h ^= h >> 31;
  }
  std::uint64_t tail = 0;
  if (i < data.size()) std::memcpy(&tail, data.data() + i, data.size() - i);
  h ^= tail;
  h *= 0x94D049BB133111EBull;
  h ^= h >> 29;
  return h;
}

/// Parsed view of the bytes of a received stamp (any bytes are accepted:
/// the caller checks `magic` and the stamp).
[[nodiscard]] inline plan_stamp parse_stamp(std::span<const std::byte> bytes) noexcept {
  plan_stamp s{};
  s.magic = 0;
  if (!bytes.empty())
    std::memcpy(&s, bytes.data(), bytes.size() < sizeof(s) ? bytes.size() : sizeof(s));
  return s;
}

/// Fixed part of a verify header (all int64 so the layout is the same on both sides).
struct wire_header {
  static constexpr std::int64_t magic_value = 0x44545256455249ll;  // "DTRVERI"
  std::int64_t magic = magic_value;
  std::int64_t src = 0;
  std::int64_t dst = 0;
  std::int64_t phase = 0;
  std::int64_t n_pieces = 0;
  std::int64_t elements = 0;
  std::int64_t elem_size = 0;
  std::int64_t hidden = 0;
  std::int64_t checksum = 0;
};
static_assert(sizeof(wire_header) == 9 * sizeof(std::int64_t));

inline constexpr std::size_t piece_words = 6;

/// Checks a received verify header's fixed part before its piece list is
/// received: the magic, and a piece count that is plausible for a receiver
/// expecting `expected` pieces (at most twice that, or 1024: a corrupt count
/// must not become a huge allocation). Returns the number of piece words to
/// receive; throws `errc::comm_error` at `where`.
[[nodiscard]] inline std::size_t checked_piece_words(const wire_header& h, std::size_t expected,
                                                     int sender, const std::string& where) {
  if (h.magic != wire_header::magic_value)
    fail(errc::comm_error, where,
         "verify: the first message from the peer is not a verify header (is the sender in "
         "verify mode?)");
  const std::size_t plausible = expected > 512 ? 2 * expected : 1024;
  if (h.n_pieces < 0 || static_cast<std::uint64_t>(h.n_pieces) > plausible)
    fail(errc::comm_error, where, "verify: corrupt header or different plan: rank ", sender,
         " announces ", h.n_pieces, " pieces, this rank expects ", expected);
  return static_cast<std::size_t>(h.n_pieces) * piece_words;
}

[[nodiscard]] inline wire_header make_header(const route_message& m, const route_plan& p) {
  wire_header h;
  h.src = m.src;
  h.dst = m.dst;
  h.phase = m.phase;
  h.n_pieces = static_cast<std::int64_t>(m.pieces.size());
  h.elements = m.elements;
  h.elem_size = static_cast<std::int64_t>(p.elem_size());
  h.hidden = p.hidden();
  return h;
}

[[nodiscard]] inline std::vector<std::int64_t> encode_pieces(const std::vector<route_piece>& ps) {
  std::vector<std::int64_t> w;
  w.reserve(ps.size() * piece_words);
  for (const auto& p : ps) {
    w.push_back(p.sample);
    w.push_back(p.slice);
    w.push_back(p.row0);
    w.push_back(p.rows);
    w.push_back(p.col0);
    w.push_back(p.cols);
  }
  return w;
}

[[nodiscard]] inline std::vector<route_piece> decode_pieces(std::span<const std::int64_t> w) {
  std::vector<route_piece> ps;
  for (std::size_t i = 0; i + piece_words <= w.size(); i += piece_words)
    ps.push_back({static_cast<int>(w[i]), static_cast<int>(w[i + 1]), w[i + 2], w[i + 3], w[i + 4],
                  w[i + 5]});
  return ps;
}

/// "3 pieces [s4 rows 0+7 cols 0+512, ...] = 10752 elements x 2 B (hidden 1024)".
[[nodiscard]] inline std::string describe_shape(const wire_header& h,
                                                const std::vector<route_piece>& ps) {
  std::string s = cat(h.n_pieces, " pieces [");
  const std::size_t shown = ps.size() < 8 ? ps.size() : 8;
  for (std::size_t i = 0; i < shown; ++i) {
    const auto& p = ps[i];
    s += cat(i ? ", " : "", 's', p.sample, " rows ", p.row0, '+', p.rows, " cols ", p.col0, '+',
             p.cols);
  }
  if (ps.size() > shown) s += cat(", ... ", ps.size() - shown, " more");
  s += cat("] = ", h.elements, " elements x ", h.elem_size, " B (hidden ", h.hidden, ", phase ",
           h.phase, ")");
  return s;
}

}  // namespace disttrain::detail
