// MPI backend: point-to-point, FIFO matching, collectives, size mismatches,
// timeouts of a silent peer, verify-mode mismatch. Run with 2 or more ranks.
#include <chrono>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
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

void point_to_point() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  MPI_CHECK(b.tag_ub() >= 32767);
  if (b.rank() == 0) {
    std::vector<disttrain::mpi_backend::request> reqs;
    std::vector<std::vector<std::int64_t>> msgs;
    for (int r = 1; r < b.size(); ++r) {
      msgs.push_back({r, 1, 2});
      msgs.push_back({r * 100});
    }
    for (int r = 1; r < b.size(); ++r) {
      const auto i = static_cast<std::size_t>(2 * (r - 1));
      reqs.push_back(b.isend(std::as_bytes(std::span(msgs[i])), r, 3));
      reqs.push_back(b.isend(std::as_bytes(std::span(msgs[i + 1])), r, 3));
    }
    disttrain::wait_all(b, std::span(reqs));
  } else {
    std::vector<std::int64_t> a(3), c(1);
    auto q1 = b.irecv(std::as_writable_bytes(std::span(a)), 0, 3);
    auto q2 = b.irecv(std::as_writable_bytes(std::span(c)), 0, 3);
    b.wait(q1);
    while (!b.test(q2)) {}
    MPI_CHECK((a == std::vector<std::int64_t>{b.rank(), 1, 2}));
    MPI_CHECK(c[0] == b.rank() * 100);
  }
}

void collectives() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  b.barrier();
  std::int64_t v = b.rank() == b.size() - 1 ? 4242 : 0;
  b.broadcast(std::as_writable_bytes(std::span(&v, 1)), b.size() - 1);
  MPI_CHECK(v == 4242);
  std::int32_t mine[2] = {b.rank(), -b.rank()};
  std::vector<std::int32_t> all(static_cast<std::size_t>(2 * b.size()));
  b.allgather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(all)));
  for (int r = 0; r < b.size(); ++r) {
    MPI_CHECK(all[static_cast<std::size_t>(2 * r)] == r);
    MPI_CHECK(all[static_cast<std::size_t>(2 * r + 1)] == -r);
  }
  std::vector<std::int32_t> wrong(3);
  MPI_CHECK(capture([&] {
              b.allgather(std::as_bytes(std::span(mine)), std::as_writable_bytes(std::span(wrong)));
            }).code() == errc::invalid_argument);
  b.group_start();
  b.group_end();
  MPI_CHECK(capture([&] { b.group_end(); }).code() == errc::invalid_argument);
  MPI_CHECK(capture([&] { (void)b.isend({}, 0, -1); }).code() == errc::invalid_argument);
  if (b.tag_ub() <
      std::numeric_limits<int>::max()) {  // OpenMPI's MPI_TAG_UB is INT_MAX: nothing above it
    MPI_CHECK(capture([&] { (void)b.isend({}, 0, b.tag_ub() + 1); }).code() ==
              errc::invalid_argument);
  }
  MPI_CHECK(capture([&] { (void)b.isend({}, b.size(), 0); }).code() == errc::invalid_argument);
}

void size_mismatch() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  if (b.rank() == 0) {
    std::vector<std::byte> big(100), small(40);
    auto s1 = b.isend(big, 1, 5);
    auto s2 = b.isend(small, 1, 6);
    b.wait(s1);
    b.wait(s2);
  } else if (b.rank() == 1) {
    std::vector<std::byte> buf(64);
    auto r1 = b.irecv(buf, 0, 5);
    const auto e1 = capture([&] { b.wait(r1); });
    MPI_CHECK(e1.code() == errc::comm_error);
    MPI_CHECK(e1.where() == "rank 1 <- rank 0 tag 5");
    MPI_CHECK(contains(e1.message(), "sends 100 bytes"));
    MPI_CHECK(contains(e1.message(), "receive of 64 bytes"));
    auto r2 = b.irecv(buf, 0, 6);
    const auto e2 = capture([&] { b.wait(r2); });
    MPI_CHECK(e2.code() == errc::comm_error);
    MPI_CHECK(contains(e2.message(), "sends 40 bytes"));
    MPI_CHECK(contains(e2.message(), "receive of 64 bytes"));
  }
  b.barrier();
}

void silent_peer_times_out() {
  mpi_backend b(MPI_COMM_WORLD, {10000ms});
  if (b.rank() == 1) {
    std::vector<std::byte> buf(4096);
    auto r = b.irecv(buf, 0, 77);
    const auto e = capture([&] { b.wait(r, 60ms); });
    MPI_CHECK(e.code() == errc::timeout);
    MPI_CHECK(e.where() == "rank 1 <- rank 0 tag 77");
    MPI_CHECK(contains(e.message(), "receive of 4096 bytes"));
    MPI_CHECK(!r.valid());
    // A rendezvous-sized send to a rank that never receives times out as well.
    std::vector<std::byte> large(8 << 20);
    auto s = b.isend(large, 0, 78);
    const auto es = capture([&] { b.wait(s, 60ms); });
    MPI_CHECK(es.code() == errc::timeout);
    MPI_CHECK(es.where() == "rank 1 -> rank 0 tag 78");
  }
  b.barrier();
}

void verify_mismatch() {
  // Sender believes sample 1 has 3 rows, receiver believes 5.
  mpi_backend b(MPI_COMM_WORLD, {2000ms});
  const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                               {"b", disttrain::module_role::backbone, 1, 1, 1}});
  const auto p = disttrain::sample_placement::round_robin(2, 1);
  const disttrain::activation_shape shape{{2, b.rank() == 0 ? 3 : 5}, 4, 4};
  if (b.rank() < 2) {
    const auto plan = disttrain::plan_boundary_route(L, 0, p, p, shape);
    std::vector<std::byte> src(static_cast<std::size_t>(plan.source_elements(b.rank())) * 4);
    std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(b.rank())) * 4);
    disttrain::buffer_pool pool;
    const auto e = capture([&] {
      disttrain::run_route(b, plan, src, dst, pool, {9, true, std::chrono::milliseconds(300)});
    });
    if (b.rank() == 1) {
      MPI_CHECK(e.code() == errc::comm_error);
      MPI_CHECK(e.where() == "rank 1 <- rank 0 tag 9");
      MPI_CHECK(
          contains(e.message(),
                   "expects 2 pieces [s0 rows 0+2 cols 0+4, s1 rows 0+5 cols 0+4] = 28 elements"));
      MPI_CHECK(contains(
          e.message(),
          "rank 0 sends 2 pieces [s0 rows 0+2 cols 0+4, s1 rows 0+3 cols 0+4] = 20 elements"));
    }
  }
  b.barrier();
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  if (int rc = disttrain::mpitest::skip_unless_ranks(2, "test_mpi_backend")) return rc;
  return disttrain::mpitest::run_all({{"point to point, FIFO per tag", point_to_point},
                                      {"collectives", collectives},
                                      {"size mismatch names both sizes", size_mismatch},
                                      {"silent peer times out", silent_peer_times_out},
                                      {"verify mode mismatch names both shapes", verify_mismatch}});
}
