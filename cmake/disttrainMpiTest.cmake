# disttrain_add_mpiexec_test(NAME <test> TARGET <target> NPROCS <n>
#                            [TIMEOUT <s>] [ENV <var=value>...] [ARGS <arg>...])
#
# Registers <test>: <target> launched on <n> processes through mpiexec with
# --oversubscribe (CI has 2 cores), as root where needed (OpenMPI refuses root
# without the two OMPI_ALLOW_* variables). Exit code 77 means skipped (e.g. no
# GPU). Used by tests/mpi, examples/mpi and the MPI benchmarks' smoke tests.
set(DISTTRAIN_MPIEXEC_ENV OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_rmaps_base_oversubscribe=1)

function(disttrain_add_mpiexec_test)
  cmake_parse_arguments(arg "" "NAME;TARGET;NPROCS;TIMEOUT" "ENV;ARGS" ${ARGN})
  foreach(required NAME TARGET NPROCS)
    if(NOT arg_${required})
      message(FATAL_ERROR "disttrain_add_mpiexec_test: ${required} is required")
    endif()
  endforeach()
  if(NOT arg_TIMEOUT)
    set(arg_TIMEOUT 120)
  endif()
  add_test(NAME ${arg_NAME}
           COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${arg_NPROCS} --oversubscribe ${MPIEXEC_PREFLAGS}
                   $<TARGET_FILE:${arg_TARGET}> ${MPIEXEC_POSTFLAGS} ${arg_ARGS})
  set_tests_properties(${arg_NAME} PROPERTIES
    ENVIRONMENT "${DISTTRAIN_MPIEXEC_ENV};${arg_ENV}" TIMEOUT ${arg_TIMEOUT} PROCESSORS ${arg_NPROCS}
    SKIP_RETURN_CODE 77)
endfunction()
