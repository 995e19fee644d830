# FindNCCL
# --------
# Finds the NVIDIA Collective Communications Library (NCCL).
#
# Search order (first hit wins): NCCL_ROOT (CMake variable or environment),
# the CUDA Toolkit's include/library directories (when CUDAToolkit was found),
# CUDA_HOME / CUDA_PATH, /usr/local/cuda, then the system default paths.
#
# Result variables:
#   NCCL_FOUND, NCCL_VERSION (from NCCL_MAJOR/MINOR/PATCH in nccl.h),
#   NCCL_INCLUDE_DIRS, NCCL_LIBRARIES
# Imported target:
#   NCCL::NCCL  (shared library; set NCCL_USE_STATIC=ON to prefer libnccl_static.a)
#
# Installed next to disttrainConfig.cmake so that
# find_package(disttrain COMPONENTS nccl) works on the consumer's machine.

set(_nccl_hints)
foreach(_root IN ITEMS "${NCCL_ROOT}" "$ENV{NCCL_ROOT}")
  if(_root)
    list(APPEND _nccl_hints "${_root}")
  endif()
endforeach()
if(CUDAToolkit_INCLUDE_DIRS)
  foreach(_dir IN LISTS CUDAToolkit_INCLUDE_DIRS)
    get_filename_component(_parent "${_dir}" DIRECTORY)
    list(APPEND _nccl_hints "${_parent}")
  endforeach()
endif()
if(CUDAToolkit_LIBRARY_DIR)
  get_filename_component(_parent "${CUDAToolkit_LIBRARY_DIR}" DIRECTORY)
  list(APPEND _nccl_hints "${_parent}")
endif()
foreach(_root IN ITEMS "$ENV{CUDA_HOME}" "$ENV{CUDA_PATH}" /usr/local/cuda)
  if(_root)
    list(APPEND _nccl_hints "${_root}")
  endif()
endforeach()
list(REMOVE_DUPLICATES _nccl_hints)

find_path(NCCL_INCLUDE_DIR NAMES nccl.h
  HINTS ${_nccl_hints}
  PATH_SUFFIXES include targets/x86_64-linux/include targets/sbsa-linux/include)

if(NCCL_USE_STATIC)
  set(_nccl_names nccl_static nccl)
else()
  set(_nccl_names nccl nccl_static)
endif()
find_library(NCCL_LIBRARY NAMES ${_nccl_names}
  HINTS ${_nccl_hints}
  PATH_SUFFIXES lib64 lib targets/x86_64-linux/lib targets/sbsa-linux/lib)

if(NCCL_INCLUDE_DIR AND EXISTS "${NCCL_INCLUDE_DIR}/nccl.h")
  file(STRINGS "${NCCL_INCLUDE_DIR}/nccl.h" _nccl_version_lines
       REGEX "^#define NCCL_(MAJOR|MINOR|PATCH)[ \t]+[0-9]+")
  foreach(_part MAJOR MINOR PATCH)
    string(REGEX MATCH "NCCL_${_part}[ \t]+([0-9]+)" _match "${_nccl_version_lines}")
    set(NCCL_VERSION_${_part} "${CMAKE_MATCH_1}")
  endforeach()
  if(NOT "${NCCL_VERSION_MAJOR}" STREQUAL "")
    set(NCCL_VERSION "${NCCL_VERSION_MAJOR}.${NCCL_VERSION_MINOR}.${NCCL_VERSION_PATCH}")
  endif()
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(NCCL
  REQUIRED_VARS NCCL_LIBRARY NCCL_INCLUDE_DIR
  VERSION_VAR NCCL_VERSION)

if(NCCL_FOUND)
  set(NCCL_INCLUDE_DIRS "${NCCL_INCLUDE_DIR}")
  set(NCCL_LIBRARIES "${NCCL_LIBRARY}")
  if(NOT TARGET NCCL::NCCL)
    add_library(NCCL::NCCL UNKNOWN IMPORTED)
    set_target_properties(NCCL::NCCL PROPERTIES
      IMPORTED_LOCATION "${NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${NCCL_INCLUDE_DIR}")
  endif()
endif()
mark_as_advanced(NCCL_INCLUDE_DIR NCCL_LIBRARY)
unset(_nccl_hints)
unset(_nccl_names)
