# cmake -P stage_install.cmake: configures disttrain's source tree as a
# consumer-facing package build (no tests/examples/benchmarks), builds it and
# installs it into PREFIX. Used as the fixture for the find_package and
# vcpkg-layout tests.
#   -DSOURCE_DIR=... -DBINARY_DIR=... -DPREFIX=... -DGENERATOR=...
#   -DCXX_COMPILER=... [-DFEATURES=MPI,CUDA,NCCL] [-DCUDA_ARCHITECTURES=80,90]
#   [-DCUDA_COMPILER=/path/to/nvcc] [-DINSTALL_CMAKEDIR=share/disttrain]   (default: disttrain's, share/cmake/disttrain)
# Lists are comma-separated so that they survive being one command-line argument.
foreach(var SOURCE_DIR BINARY_DIR PREFIX GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "stage_install.cmake: ${var} is required")
  endif()
endforeach()

function(run)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "+ ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${pretty}")
  endif()
endfunction()

file(REMOVE_RECURSE "${PREFIX}")
set(compiler_args)
if(CXX_COMPILER)
  list(APPEND compiler_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
string(REPLACE "," ";" features "${FEATURES}")
foreach(feature IN LISTS features)
  list(APPEND compiler_args "-DDISTTRAIN_ENABLE_${feature}=ON")
endforeach()
if(CUDA_COMPILER)
  list(APPEND compiler_args "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}")
endif()
if(INSTALL_CMAKEDIR)
  list(APPEND compiler_args "-DDISTTRAIN_INSTALL_CMAKEDIR=${INSTALL_CMAKEDIR}")
endif()
if(CUDA_ARCHITECTURES)
  # A ;-list cannot pass through -D inside a list: use an initial-cache file.
  string(REPLACE "," ";" archs "${CUDA_ARCHITECTURES}")
  file(WRITE "${BINARY_DIR}.init.cmake" "set(CMAKE_CUDA_ARCHITECTURES \"${archs}\" CACHE STRING \"\")\n")
  list(APPEND compiler_args -C "${BINARY_DIR}.init.cmake")
endif()
run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}"
    ${compiler_args}
    -DCMAKE_BUILD_TYPE=Release
    -DDISTTRAIN_BUILD_TESTS=OFF -DDISTTRAIN_BUILD_BENCHMARKS=OFF
    -DDISTTRAIN_BUILD_EXAMPLES=OFF -DDISTTRAIN_INSTALL=ON)
run("${CMAKE_COMMAND}" --build "${BINARY_DIR}")
run("${CMAKE_COMMAND}" --install "${BINARY_DIR}" --prefix "${PREFIX}")
