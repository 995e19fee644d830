// Built only when the consumer asked for COMPONENTS mpi: disttrain::mpi must
// bring MPI's headers and libraries and define DISTTRAIN_HAS_MPI, and the MPI
// backend's header must compile against it.
#include <disttrain/comm/mpi_backend.hpp>
#include <disttrain/core/version.hpp>

#include <cstdio>

#include <mpi.h>

#ifndef DISTTRAIN_HAS_MPI
#error "disttrain::mpi must define DISTTRAIN_HAS_MPI"
#endif

int main() {
  int major = 0, minor = 0;
  // MPI_Get_version may be called before MPI_Init.
  if (MPI_Get_version(&major, &minor) != MPI_SUCCESS || major < 3) {
    std::fprintf(stderr, "FAILED: MPI_Get_version gave %d.%d\n", major, minor);
    return 1;
  }
  std::printf("disttrain %s with MPI %d.%d: OK\n", disttrain::version_string, major, minor);
  return 0;
}
