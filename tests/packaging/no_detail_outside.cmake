# cmake -DSOURCE_DIR=... -P no_detail_outside.cmake: fails if code outside the
# library names disttrain's internals: `disttrain::detail::...` or a namespace
# alias of `disttrain::detail`, in the examples, tools, benchmarks, the Python
# extension, the packaging consumers and test_package. What host code needs is
# public (core/check.hpp, core/checked.hpp, core/json.hpp, the parts'
# read_* functions); the unit tests under tests/ may test internals.
cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(no_detail_outside.cmake SOURCE_DIR)

set(files)
foreach(root IN ITEMS examples tools benchmarks python/src test_package tests/packaging)
  if(IS_DIRECTORY "${SOURCE_DIR}/${root}")
    file(GLOB_RECURSE found RELATIVE "${SOURCE_DIR}"
         "${SOURCE_DIR}/${root}/*.cpp" "${SOURCE_DIR}/${root}/*.hpp" "${SOURCE_DIR}/${root}/*.cu")
    list(APPEND files ${found})
  endif()
endforeach()
list(FILTER files EXCLUDE REGEX "_fixture/")
list(SORT files)
if(NOT files)
  message(FATAL_ERROR "no_detail_outside.cmake: no sources under ${SOURCE_DIR}")
endif()

set(problems 0)
foreach(f IN LISTS files)
  file(READ "${SOURCE_DIR}/${f}" text)
  string(REPLACE ";" "," text "${text}")  # a CMake list separator otherwise
  string(REPLACE "\n" ";" lines "${text}")
  foreach(line IN LISTS lines)
    if(line MATCHES "disttrain::detail([^a-zA-Z0-9_]|$)")
      string(STRIP "${line}" line)
      message(SEND_ERROR "${f} names disttrain's internals: ${line}")
      math(EXPR problems "${problems} + 1")
    endif()
  endforeach()
endforeach()
list(LENGTH files n)
if(problems)
  message(FATAL_ERROR "no_detail_outside.cmake: ${problems} problem(s) in ${n} files")
endif()
message(STATUS "no_detail_outside.cmake: ${n} files outside the library name no disttrain::detail")
