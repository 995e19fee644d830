# disttrain_find_required(<Package> <min-version or ""> <debian-packages> [find_package args...])
# Finds a dependency offline; if it is missing, stops configuration with one
# message naming the Debian package(s) that provide it.
include(GNUInstallDirs)
macro(disttrain_find_required pkg version debs)
  if("${version}" STREQUAL "")
    find_package(${pkg} QUIET ${ARGN})
  else()
    find_package(${pkg} ${version} QUIET ${ARGN})
  endif()
  if(NOT ${pkg}_FOUND)
    message(FATAL_ERROR "disttrain: required dependency ${pkg} ${version} not found. "
                        "On Debian/Ubuntu install it with: sudo apt-get install -y ${debs}")
  endif()
endmacro()
