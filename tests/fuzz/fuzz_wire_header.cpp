// libFuzzer target: the parsers of what a route receives besides payloads:
// the plan stamp and the verify header with its piece list. Arbitrary bytes
// must be accepted or rejected with `disttrain::error`, never read out of
// bounds, allocate without bound or overflow.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "disttrain/comm/detail/wire_header.hpp"
#include "fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  namespace d = disttrain::detail;
  disttrain::fuzz::input in(data, size);
  const std::size_t expected = in.byte();
  const auto stamp = d::parse_stamp(std::as_bytes(std::span(data, size)));
  (void)disttrain::hex64(stamp.plan);
  d::wire_header h;
  const auto head = in.rest();
  if (!head.empty()) std::memcpy(&h, head.data(), std::min(head.size(), sizeof(h)));
  if (in.flag()) h.magic = d::wire_header::magic_value;  // reach the checks behind the magic
  try {
    const std::size_t words = d::checked_piece_words(h, expected, 1, "fuzz");
    disttrain::fuzz::expect(words <= (expected > 512 ? 2 * expected : 1024) * d::piece_words);
    std::vector<std::int64_t> w(words);
    const auto body = head.size() > sizeof(h) ? head.subspan(sizeof(h)) : head.subspan(0, 0);
    const std::size_t n = std::min(body.size(), w.size() * sizeof(std::int64_t));
    if (n > 0) std::memcpy(w.data(), body.data(), n);
    const auto pieces = d::decode_pieces(w);
    disttrain::fuzz::expect(pieces.size() * d::piece_words == words);
    (void)d::describe_shape(h, pieces);
  } catch (const disttrain::error&) {}
  return 0;
}
