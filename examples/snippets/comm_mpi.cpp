// The MPI-only examples of the comm part (disttrain/comm/mpi_backend.hpp):
// compiled against disttrain::mpi when it is built, not run (they need
// mpiexec and two ranks). See snippets.hpp for the layout.
#include <chrono>
#include <cstddef>
#include <vector>

#include "disttrain/comm/mpi_backend.hpp"

namespace {

[[maybe_unused]] void mpi_backend(int argc, char** argv) {
  std::vector<std::byte> bytes(64);
  //! [mpi_backend]
  disttrain::mpi_session session(argc, argv);  // MPI_Init_thread / MPI_Finalize
  disttrain::mpi_backend b(MPI_COMM_WORLD, {std::chrono::seconds(30)});
  if (b.rank() == 0) {
    auto r = b.isend(bytes, 1, 0);
    b.wait(r);
  }
  //! [mpi_backend]
}

}  // namespace

//! [mpi_session]
int main(int argc, char** argv) { disttrain::mpi_session s(argc, argv); /* ... */ }
//! [mpi_session]
