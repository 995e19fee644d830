# cmake -DSOURCE_DIR=... -P optional_deps.cmake: fails if a public header that
# does not belong to a header-only component reaches (directly or through the
# disttrain headers it includes) the component's third-party library:
#   calibration (disttrain::calibration): Eigen, <Eigen/...>
#   format      (disttrain::format):      fmt,   <fmt/...>
# The core target (disttrain::disttrain) links neither, so such a header would
# not compile for a core-only consumer. The umbrella headers (disttrain.hpp,
# <part>.hpp) belong to no component and must reach neither.
# The same check keeps nlohmann/json in the JSON layer ("json" below): it is a
# dependency of the core target, but only the JSON readers and writers (and
# the calibration component, whose headers read JSON) may include it, so that
# code which reads or writes no JSON does not parse it (docs/header_cost.md).
#
# Which headers belong to which component lives here and only here (entries
# "<component>:<regular expression on the path under include/>:<include
# marker>"; docs/packaging.md shows the same).
set(disttrain_component_headers
  "calibration:^disttrain/cost/(calibration|profiler|format)\\.hpp$:<Eigen/"
  "format:/format\\.hpp$:<fmt/"
  "json:^disttrain/(json|[a-z]+/json|sim/trace|exec/trace|plan/fidelity|cost/calibration|cost/profiler|cost/format)\\.hpp$:<nlohmann/")

cmake_minimum_required(VERSION 3.25)
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(optional_deps.cmake SOURCE_DIR)

set(include_root "${SOURCE_DIR}/include")
file(GLOB_RECURSE headers RELATIVE "${include_root}" "${include_root}/disttrain/*.hpp")
list(SORT headers)
if(NOT headers)
  message(FATAL_ERROR "optional_deps.cmake: no headers under ${include_root}/disttrain")
endif()

# Direct edges: the disttrain headers each header includes, and the lines that
# include a component's library (kept for the report).
foreach(h IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${h}" id)
  file(STRINGS "${include_root}/${h}" lines REGEX "^[ \t]*#[ \t]*include")
  set(deps_${id})
  set(own_${id})
  foreach(line IN LISTS lines)
    if(line MATCHES "[<\"](disttrain/[^>\"]+)[>\"]")
      list(APPEND deps_${id} "${CMAKE_MATCH_1}")
    endif()
    foreach(entry IN LISTS disttrain_component_headers)
      string(REPLACE ":" ";" entry "${entry}")
      list(GET entry 0 comp)
      list(GET entry -1 marker)
      string(FIND "${line}" "${marker}" pos)
      if(NOT pos EQUAL -1)
        list(APPEND own_${id} "${comp}")
      endif()
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES own_${id})
endforeach()

# needs_<id>: the components a header reaches, through its includes (a
# fixpoint over the include graph; cycles are harmless).
foreach(h IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${h}" id)
  set(needs_${id} ${own_${id}})
endforeach()
set(changed TRUE)
while(changed)
  set(changed FALSE)
  foreach(h IN LISTS headers)
    string(MAKE_C_IDENTIFIER "${h}" id)
    foreach(dep IN LISTS deps_${id})
      string(MAKE_C_IDENTIFIER "${dep}" did)
      foreach(comp IN LISTS needs_${did})
        if(NOT comp IN_LIST needs_${id})
          list(APPEND needs_${id} ${comp})
          set(via_${id}_${comp} "${dep}")
          set(changed TRUE)
        endif()
      endforeach()
    endforeach()
  endforeach()
endwhile()

set(n_bad 0)
set(summary)
foreach(h IN LISTS headers)
  string(MAKE_C_IDENTIFIER "${h}" id)
  foreach(entry IN LISTS disttrain_component_headers)
    string(REPLACE ":" ";" entry "${entry}")
    list(GET entry 0 comp)
    list(GET entry 1 allowed)
    list(GET entry -1 marker)
    if(NOT comp IN_LIST needs_${id})
      continue()
    endif()
    if(h MATCHES "${allowed}")
      list(APPEND summary "${comp}: ${h}")
      continue()
    endif()
    # Follow the chain of includes down to the header that includes the library.
    set(chain "${h}")
    set(cur "${id}")
    while(DEFINED via_${cur}_${comp})
      list(APPEND chain "${via_${cur}_${comp}}")
      string(MAKE_C_IDENTIFIER "${via_${cur}_${comp}}" cur)
    endwhile()
    list(JOIN chain " -> " chain_text)
    message(SEND_ERROR "include/${h}: reaches ${marker}...> (component ${comp}): ${chain_text}")
    math(EXPR n_bad "${n_bad} + 1")
  endforeach()
endforeach()
list(JOIN summary "\n  " summary_text)
message(STATUS "headers of the header-only components:\n  ${summary_text}")
if(n_bad GREATER 0)
  message(FATAL_ERROR "${n_bad} header(s) outside a component reach its library; move the "
                      "include into the component's headers or add the header to the component "
                      "(tests/packaging/optional_deps.cmake, docs/packaging.md)")
endif()
message(STATUS "optional dependencies: OK (only the components' headers reach Eigen or fmt, only the JSON layer nlohmann/json)")
