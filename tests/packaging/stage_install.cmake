# cmake -P stage_install.cmake: configures disttrain's source tree as a
# consumer-facing package build (no tests/examples/benchmarks), builds it and
# installs it into PREFIX. Used as the fixture for the find_package and
# vcpkg-layout tests.
#   -DSOURCE_DIR=... -DBINARY_DIR=... -DPREFIX=... -DGENERATOR=...
#   -DCXX_COMPILER=... [-DFEATURES=MPI,CUDA,NCCL] [-DCUDA_ARCHITECTURES=80,90]
#   [-DCUDA_COMPILER=/path/to/nvcc] [-DINSTALL_CMAKEDIR=share/disttrain]   (default: disttrain's, share/cmake/disttrain)
# Lists are comma-separated so that they survive being one command-line argument.
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(stage_install.cmake SOURCE_DIR BINARY_DIR PREFIX GENERATOR)


file(REMOVE_RECURSE "${PREFIX}")
disttrain_compiler_args(compiler_args)
string(REPLACE "," ";" features "${FEATURES}")
foreach(feature IN LISTS features)
  list(APPEND compiler_args "-DDISTTRAIN_ENABLE_${feature}=ON")
endforeach()
if(INSTALL_CMAKEDIR)
  list(APPEND compiler_args "-DDISTTRAIN_INSTALL_CMAKEDIR=${INSTALL_CMAKEDIR}")
endif()
if(CUDA_ARCHITECTURES)
  # A ;-list cannot pass through -D inside a list: use an initial-cache file.
  string(REPLACE "," ";" archs "${CUDA_ARCHITECTURES}")
  file(WRITE "${BINARY_DIR}.init.cmake" "set(CMAKE_CUDA_ARCHITECTURES \"${archs}\" CACHE STRING \"\")\n")
  list(APPEND compiler_args -C "${BINARY_DIR}.init.cmake")
endif()
disttrain_run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}"
    ${compiler_args}
    -DCMAKE_BUILD_TYPE=Release
    -DDISTTRAIN_BUILD_TESTS=OFF -DDISTTRAIN_BUILD_BENCHMARKS=OFF
    -DDISTTRAIN_BUILD_EXAMPLES=OFF -DDISTTRAIN_INSTALL=ON)
disttrain_run("${CMAKE_COMMAND}" --build "${BINARY_DIR}")
disttrain_run("${CMAKE_COMMAND}" --install "${BINARY_DIR}" --prefix "${PREFIX}")
