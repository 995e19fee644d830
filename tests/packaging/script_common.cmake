# Shared by the `cmake -P` scripts of the packaging tests.
#
# disttrain_require_vars(<script> <var>...): stops with "<script>: <var> is required".
# disttrain_run(<command> <args>...):        echoes the command, runs it, stops if it fails.
# disttrain_compiler_args(<out>):            -D options for CXX_COMPILER / CUDA_COMPILER when set.
function(disttrain_require_vars script)
  foreach(var IN LISTS ARGN)
    if(NOT DEFINED ${var})
      message(FATAL_ERROR "${script}: ${var} is required")
    endif()
  endforeach()
endfunction()

function(disttrain_run)
  string(REPLACE ";" " " pretty "${ARGN}")
  message(STATUS "+ ${pretty}")
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "command failed (${rc}): ${pretty}")
  endif()
endfunction()

function(disttrain_compiler_args out)
  set(args)
  if(CXX_COMPILER)
    list(APPEND args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
  endif()
  if(CUDA_COMPILER)
    list(APPEND args "-DCMAKE_CUDA_COMPILER=${CUDA_COMPILER}")
  endif()
  set(${out} "${args}" PARENT_SCOPE)
endfunction()
