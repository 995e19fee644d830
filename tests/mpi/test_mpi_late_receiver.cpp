// Issue 13 item 1: a send that timed out must not have its buffer freed or
// reused while MPI may still read it. A receiver that posts late (a
// straggler) must then get the intact bytes or an error, never silent wrong
// data. Run with 2 ranks.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "mpi_harness.hpp"

using disttrain::errc;
using disttrain::mpi_backend;
using disttrain::mpitest::capture;
using namespace std::chrono_literals;

namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
std::vector<std::byte> pattern(std::size_t n, std::size_t seed) {
  std::vector<std::byte> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<std::byte>((i * 131 + 7 * seed) % 251);
  return v;
}
// True if `b` says what became of the timed-out send: cancelled, or kept.
bool explains_send_timeout(const disttrain::error& e) {
  return contains(e.message(), "the send was cancelled") ||
         contains(e.message(), "MPI cannot cancel the send");
}

// Backend level: the owner of a timed-out send's buffer lives until MPI is
// done with it; the late receiver gets the intact bytes.
struct flag_owner final : disttrain::send_buffer_owner {
  flag_owner(std::vector<std::byte> d, bool* alive) : data(std::move(d)), alive_(alive) {
    *alive_ = true;
  }
  ~flag_owner() override {
    // Scribble like an allocator reusing the memory would, then report.
    for (auto& x : data) x = std::byte{0xEE};
    *alive_ = false;
  }
  void detach() noexcept override { detached = true; }
  std::vector<std::byte> data;
  bool detached = false;
  bool* alive_;
};

void backend_keeps_timed_out_send_buffer() {
  constexpr std::size_t n = 8 << 20;  // rendezvous
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  if (b.rank() == 0) {
    bool alive = false;
    auto owner = std::make_unique<flag_owner>(pattern(n, 1), &alive);
    const std::span<const std::byte> data(owner->data);
    auto s = b.isend(data, 1, 41);
    s.keep_buffer(std::move(owner));
    const auto e = capture([&] { b.wait(s, 100ms); });
    MPI_CHECK(e.code() == errc::timeout);
    MPI_CHECK(explains_send_timeout(e));
    MPI_CHECK(!s.valid());
    const bool kept = contains(e.message(), "MPI cannot cancel the send");
    if (kept) {
      MPI_CHECK(alive);  // not freed while MPI may read it
      MPI_CHECK(b.sends_in_flight() == 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);  // 1: the receiver may post now
    MPI_Barrier(MPI_COMM_WORLD);  // 2: it has received (or timed out)
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (b.sends_in_flight() > 0 && std::chrono::steady_clock::now() < until) {}
    MPI_CHECK(b.sends_in_flight() == 0);
    MPI_CHECK(!alive);  // freed once MPI completed the send
  } else if (b.rank() == 1) {
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::byte> buf(n);
    auto r = b.irecv(buf, 0, 41);
    const auto e = capture([&] { b.wait(r, 2000ms); });
    if (e.code() == errc::internal)  // no error: the bytes must be intact
      MPI_CHECK(buf == pattern(n, 1));
    else
      MPI_CHECK(e.code() == errc::timeout);  // the send was cancelled
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  b.barrier();
}

// A receive withdrawn after MPI matched its message: rank 0 posts an 8 MiB
// (rendezvous) send, then makes no MPI call for 1.5 s; rank 1's 300 ms wait
// times out while the message is arriving. Where MPI could not cancel the
// receive (the sender must move the rest of the bytes: no single-copy
// transport), the backend keeps it (receives_in_flight() == 1) and the error
// says so; once the sender goes on, the message lands in the buffer (why
// the caller must not reuse it) and the count drops to 0. Otherwise the
// receive completed, or was withdrawn unmatched and a second one takes the
// message.
void backend_keeps_matched_receive() {
  constexpr std::size_t n = 8 << 20;  // rendezvous
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  if (b.rank() == 0) {
    const std::vector<std::byte> data = pattern(n, 3);
    auto s = b.isend(data, 1, 43);
    MPI_Barrier(MPI_COMM_WORLD);          // the send is posted
    std::this_thread::sleep_for(1500ms);  // no MPI progress here
    b.wait(s);                            // the kept receive takes the rest
  } else if (b.rank() == 1) {
    MPI_Barrier(MPI_COMM_WORLD);
    std::vector<std::byte> buf(n);
    auto r = b.irecv(buf, 0, 43);
    const auto e = capture([&] { b.wait(r, 300ms); });
    const bool kept = contains(e.message(), "cannot cancel the receive");
    std::fprintf(stderr, "[rank 1] the receive %s\n",
                 e.code() == errc::internal ? "completed"
                 : kept                     ? "timed out and was kept by the backend"
                                            : "timed out unmatched");
    if (e.code() == errc::internal) {  // no error: the bytes are in
      MPI_CHECK(buf == pattern(n, 3));
    } else {
      MPI_CHECK(e.code() == errc::timeout);
      MPI_CHECK(b.receives_in_flight() == (kept ? 1U : 0U));
      if (kept) {
        MPI_CHECK(contains(e.message(), "receives_in_flight() > 0"));
        const auto until = std::chrono::steady_clock::now() + 5s;
        while (b.receives_in_flight() > 0 && std::chrono::steady_clock::now() < until) {}
        MPI_CHECK(b.receives_in_flight() == 0);
        MPI_CHECK(buf == pattern(n, 3));  // written after the timeout
      } else {
        std::vector<std::byte> again(n);
        auto r2 = b.irecv(again, 0, 43);
        b.wait(r2);
        MPI_CHECK(again == pattern(n, 3));
      }
    }
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Route level: a packed send (staging buffer from the pool) times out, the
// sender reuses the pool and its own source buffer, then the receiver posts.
void route_straggler_gets_intact_bytes_or_error() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                               {"b", disttrain::module_role::backbone, 1, 1, 1}});
  // Sample order differs between the two sides: the sender packs (2 blocks).
  const disttrain::sample_placement pa({{1, 0}});
  const disttrain::sample_placement pb({{0, 1}});
  const disttrain::activation_shape shape{{512, 512}, 1024, 4};  // 4 MiB message
  const disttrain::route_endpoint from{disttrain::module_id{0}, disttrain::stage_id{0}};
  const disttrain::route_endpoint to{disttrain::module_id{1}, disttrain::stage_id{0}};
  const auto plan = disttrain::plan_route(L, from, pa, to, pb, shape);
  const auto me = b.rank();
  std::vector<std::byte> src(static_cast<std::size_t>(plan.source_elements(me)) * 4);
  std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(me)) * 4);
  disttrain::buffer_pool pool;
  if (me == 0) {
    src = pattern(src.size(), 2);
    const auto e = capture([&] {
      disttrain::run_route(b, plan, src, dst, pool, {42, false, 100ms});
    });
    MPI_CHECK(e.code() == errc::timeout);
    MPI_CHECK(explains_send_timeout(e));
    // The application reuses its buffers and the pool right away.
    for (auto& x : src) x = std::byte{0xEE};
    for (int i = 0; i < 4; ++i) {
      auto l = pool.acquire(src.size());
      for (auto& x : l.span()) x = std::byte{0xEE};
    }
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    const auto until = std::chrono::steady_clock::now() + 5s;
    while (b.sends_in_flight() > 0 && std::chrono::steady_clock::now() < until) {}
    MPI_CHECK(b.sends_in_flight() == 0);
  } else if (me == 1) {
    MPI_Barrier(MPI_COMM_WORLD);
    // What the route must deliver: the sender's buffer holds samples 1, 0.
    const auto sent = pattern(src.size() + dst.size(), 2);
    const std::size_t half = dst.size() / 2;
    std::vector<std::byte> want(dst.size());
    std::copy(sent.begin() + static_cast<std::ptrdiff_t>(half),
              sent.begin() + static_cast<std::ptrdiff_t>(2 * half), want.begin());
    std::copy(sent.begin(), sent.begin() + static_cast<std::ptrdiff_t>(half),
              want.begin() + static_cast<std::ptrdiff_t>(half));
    const auto e = capture([&] {
      disttrain::run_route(b, plan, src, dst, pool, {42, false, 2000ms});
    });
    if (e.code() == errc::internal)
      MPI_CHECK(dst == want);  // no error: every byte must be right
    else
      MPI_CHECK(e.code() == errc::timeout);
    MPI_Barrier(MPI_COMM_WORLD);
  } else {
    MPI_Barrier(MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
  }
  b.barrier();
}

// Route level, zero copy (issue 38): a rows-split route whose message is one
// contiguous range is sent straight from the caller's source buffer. The
// send times out, the caller catches the error and reuses its buffer (which
// the error says not to do), then the receiver posts. MPI still reads the
// caller's buffer, now overwritten: the receiver must fail naming the sender
// (its void notice), never report the overwritten bytes as received.
void route_zero_copy_straggler_gets_intact_bytes_or_error() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                               {"b", disttrain::module_role::backbone, 1, 1, 1}});
  const disttrain::sample_placement p({{0, 1}});  // the same order: one contiguous range
  const disttrain::activation_shape shape{{512, 512}, 1024, 4};  // 4 MiB: rendezvous
  const disttrain::route_endpoint from{disttrain::module_id{0}, disttrain::stage_id{0}};
  const disttrain::route_endpoint to{disttrain::module_id{1}, disttrain::stage_id{0}};
  const auto plan =
      disttrain::plan_route(L, from, p, to, p, shape, {.split = disttrain::split_axis::rows});
  const auto me = b.rank();
  std::vector<std::byte> src(static_cast<std::size_t>(plan.source_elements(me)) * 4);
  std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(me)) * 4);
  disttrain::buffer_pool pool;
  constexpr int rounds = 4;  // each a fresh route: the outcome must hold every time
  for (int round = 0; round < rounds; ++round) {
    const int tag = 50 + round;
    if (me == 0) {
      src = pattern(src.size(), 3 + static_cast<std::size_t>(round));
      const auto e = capture([&] {
        disttrain::route_transfer<mpi_backend> t(b, plan, pool, {tag, false, 100ms});
        t.start(src, dst);
        MPI_CHECK(t.packed_send_bytes() == 0);  // zero copy: MPI reads `src` itself
        t.wait();
      });
      MPI_CHECK(e.code() == errc::timeout);
      for (auto& x : src) x = std::byte{0xEE};  // the misuse: the buffer is reused at once
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
      const auto until = std::chrono::steady_clock::now() + 5s;
      while (b.sends_in_flight() > 0 && std::chrono::steady_clock::now() < until) {}
    } else if (me == 1) {
      MPI_Barrier(MPI_COMM_WORLD);
      std::fill(dst.begin(), dst.end(), std::byte{0});
      const auto e = capture([&] {
        disttrain::run_route(b, plan, src, dst, pool, {tag, false, 2000ms});
      });
      if (e.code() == errc::internal) {  // no error: every byte must be the sent one
        MPI_CHECK(dst == pattern(dst.size(), 3 + static_cast<std::size_t>(round)));
      } else {
        MPI_CHECK(e.code() == errc::comm_error || e.code() == errc::timeout);
        if (e.code() == errc::comm_error) MPI_CHECK(contains(e.message(), "rank 0 voided"));
      }
      MPI_Barrier(MPI_COMM_WORLD);
    } else {
      MPI_Barrier(MPI_COMM_WORLD);
      MPI_Barrier(MPI_COMM_WORLD);
    }
  }
  b.barrier();
}

// After a receive timed out, the application recreates the backend; a
// straggler's message sent on the old communicator must not reach the new
// one (OpenMPI reuses a freed communicator's context id: the old one must
// stay allocated).
void late_message_never_reaches_the_next_communicator() {
  const int me = disttrain::mpitest::world_rank();
  std::vector<std::byte> buf(64, std::byte{0});
  std::optional<mpi_backend> a(std::in_place, MPI_COMM_WORLD, disttrain::comm_options{50ms});
  if (me == 1) {
    auto r = a->irecv(buf, 0, 5);
    MPI_CHECK(capture([&] { a->wait(r); }).code() == errc::timeout);
    a.reset();  // the receiver gives up on `a` and destroys it ...
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) {  // ... then the straggler sends on it (small: eager, completes at once)
    const auto data = pattern(64, 9);
    auto s = a->isend(data, 1, 5);
    a->wait(s, 2000ms);
    a.reset();
  }
  MPI_Barrier(MPI_COMM_WORLD);
  mpi_backend b(MPI_COMM_WORLD, {300ms});  // the replacement
  if (me == 1) {
    auto r = b.irecv(buf, 0, 5);
    const auto e = capture([&] { b.wait(r); });
    MPI_CHECK(e.code() == errc::timeout);  // nothing was sent on `b`
    MPI_CHECK(buf == std::vector<std::byte>(64, std::byte{0}));
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  if (int rc = disttrain::mpitest::skip_unless_ranks(2, "test_mpi_late_receiver")) return rc;
  return disttrain::mpitest::run_all(
      {{"timed-out send: buffer owner kept until MPI completes",
        backend_keeps_timed_out_send_buffer},
       {"a receive MPI matched and could not cancel", backend_keeps_matched_receive},
       {"route straggler gets intact bytes or an error",
        route_straggler_gets_intact_bytes_or_error},
       {"zero-copy route straggler: intact bytes or an error "
        "naming the sender",
        route_zero_copy_straggler_gets_intact_bytes_or_error},
       {"a late message never reaches the next communicator",
        late_message_never_reaches_the_next_communicator}});
}
