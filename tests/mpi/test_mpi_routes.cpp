// Every small route case (<= 8 ranks) over the MPI backend, with and without
// verify mode, checked element by element on every receiving rank.
#include <chrono>
#include <string>
#include <vector>

#include "disttrain/comm/mpi_backend.hpp"
#include "disttrain/comm/route_transfer.hpp"
#include "mpi_harness.hpp"
#include "route_cases.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  disttrain::mpi_session session(argc, argv);
  std::vector<std::pair<std::string, std::function<void()>>> cases;
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  for (const auto& c : disttrain::test::small_route_cases()) {
    if (c.layout.world_size() > n)
      continue;  // every rank runs every case (MPI_Comm_dup is collective)
    for (bool verify : {false, true})
      cases.emplace_back(c.name + (verify ? " (verify)" : ""), [c, verify] {
        disttrain::mpi_backend b(MPI_COMM_WORLD, {20000ms});
        const int me = b.rank();
        if (me < c.layout.world_size()) {
          const auto plan =
              disttrain::plan_route(c.layout, c.from, c.pa, c.to, c.pb, c.shape, c.opts);
          auto bufs = disttrain::test::make_buffers(c, me);
          disttrain::buffer_pool pool;
          disttrain::run_route(b, plan, bufs.source, bufs.destination, pool,
                               {11, verify, std::chrono::milliseconds(-1)});
          MPI_CHECK(disttrain::test::count_mismatches(c, me, bufs) == 0);
        }
        b.barrier();
      });
  }
  if (cases.empty()) {
    std::printf("SKIPPED: no route case fits %d ranks\n", n);
    return 77;
  }
  return disttrain::mpitest::run_all(cases);
}
