// Built when the package was created with -o disttrain/*:with_mpi=True.
#include <disttrain/disttrain.hpp>

#include <cstdio>

#include <mpi.h>

#ifndef DISTTRAIN_HAS_MPI
#error "disttrain::mpi must define DISTTRAIN_HAS_MPI"
#endif

int main() {
  int major = 0, minor = 0;
  if (MPI_Get_version(&major, &minor) != MPI_SUCCESS || major < 3) return 1;
  std::printf("disttrain %s with MPI %d.%d: OK\n", disttrain::version_string, major, minor);
  return 0;
}
