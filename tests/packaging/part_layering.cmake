# cmake -DSOURCE_DIR=... -P part_layering.cmake: fails if a header of a part
# (include/disttrain/<part>/**.hpp, detail/ included, and the part's umbrella
# include/disttrain/<part>.hpp) includes a header of a part it may not
# depend on, naming the file, the line and the forbidden edge.
#
# The allowed dependency graph lives here and only here (docs/architecture.md,
# "Part layering", shows the same graph). A part may include its own headers,
# the parts listed after its colon and, transitively, what those may include.
# `*` means every part. A folder under include/disttrain/ that is not listed
# is an error too (add the new part to the graph).
set(disttrain_part_graph
  "core:"
  "model:core"
  "cost:model"
  "schedule:core"
  "sim:schedule"
  "kernels:core"
  "data:comm,reorder"  # producer ranks send over a comm_backend, in the order of reorder's map
  "reorder:core"
  "plan:cost"
  "comm:kernels"  # routes are planned on core/topology.hpp; stamps hash with core/rng.hpp
  "exec:comm,sim"      # executes schedule/ programs, records sim/ traces
  "bind:*")            # the adapters that join parts

# A part reaches another part only through its public headers, never its
# detail/ (issue 40). The includes of another part's detail/ still allowed, as
# "header: included header"; the list only shrinks (issue 38 removes all
# four: the second simulator and replay, the abort-notice protocol written twice).
set(disttrain_detail_exceptions
  "include/disttrain/sim/simulator.hpp: disttrain/schedule/detail/compiled.hpp"
  "include/disttrain/sim/simulator.hpp: disttrain/schedule/detail/replay.hpp")

cmake_minimum_required(VERSION 3.25)  # policies of `cmake -P` (IN_LIST, empty list elements)
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(part_layering.cmake SOURCE_DIR)

# ---- the graph: direct edges, then the transitive closure --------------------
set(parts)
foreach(entry IN LISTS disttrain_part_graph)
  string(REPLACE ":" ";" pair "${entry}")
  list(GET pair 0 part)
  list(LENGTH pair n)
  set(deps "")
  if(n GREATER 1)
    list(GET pair 1 deps)
    string(REPLACE "," ";" deps "${deps}")
  endif()
  list(APPEND parts ${part})
  set(direct_${part} ${deps})
endforeach()
foreach(part IN LISTS parts)
  foreach(dep IN LISTS direct_${part})
    if(NOT dep STREQUAL "*" AND NOT dep IN_LIST parts)
      message(FATAL_ERROR "part_layering.cmake: part '${part}' lists unknown part '${dep}'")
    endif()
  endforeach()
endforeach()
# Closure by repeated expansion (the graph is small; a cycle is reported).
foreach(part IN LISTS parts)
  if("*" IN_LIST direct_${part})
    set(allowed_${part} ${parts})
    continue()
  endif()
  set(todo ${direct_${part}})
  set(seen)
  while(todo)
    list(POP_FRONT todo dep)
    if(dep IN_LIST seen)
      continue()
    endif()
    if(dep STREQUAL part)
      message(FATAL_ERROR "part_layering.cmake: the graph has a cycle through '${part}'")
    endif()
    list(APPEND seen ${dep})
    list(APPEND todo ${direct_${dep}})
  endwhile()
  list(SORT seen)
  set(allowed_${part} ${seen})
endforeach()

# ---- the headers -------------------------------------------------------------
set(root "${SOURCE_DIR}/include/disttrain")
file(GLOB entries RELATIVE "${root}" "${root}/*")
set(bad 0)
set(detail_seen)
set(edges 0)
set(files 0)
foreach(entry IN LISTS entries)
  if(IS_DIRECTORY "${root}/${entry}")
    if(NOT entry IN_LIST parts)
      message(NOTICE "include/disttrain/${entry}/: part '${entry}' is not in the part graph "
                     "(tests/packaging/part_layering.cmake, docs/architecture.md)")
      math(EXPR bad "${bad} + 1")
    endif()
  endif()
endforeach()

foreach(part IN LISTS parts)
  file(GLOB_RECURSE headers "${root}/${part}/*.hpp" "${root}/${part}/*.inl")
  if(EXISTS "${root}/${part}.hpp")
    list(APPEND headers "${root}/${part}.hpp")
  endif()
  foreach(f IN LISTS headers)
    math(EXPR files "${files} + 1")
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    file(READ "${f}" text)
    # One list element per line: neutralise the characters CMake's list
    # splitting treats specially, so that line numbers stay exact.
    string(REPLACE "\\" "/" text "${text}")
    string(REPLACE ";" "," text "${text}")
    string(REPLACE "[" "(" text "${text}")
    string(REPLACE "]" ")" text "${text}")
    string(REPLACE "\n" ";" lines "${text}")
    set(lineno 0)
    foreach(line IN LISTS lines)
      math(EXPR lineno "${lineno} + 1")
      if(NOT line MATCHES "^[ \t]*#[ \t]*include[ \t]*[<\"]disttrain/([A-Za-z0-9_]+)(/|\\.hpp)")
        continue()
      endif()
      set(target "${CMAKE_MATCH_1}")
      if(target STREQUAL part)
        continue()
      endif()
      math(EXPR edges "${edges} + 1")
      if(line MATCHES "[<\"](disttrain/[A-Za-z0-9_]+/detail/[^>\"]+)")
        set(inner "${CMAKE_MATCH_1}")
        if("${rel}: ${inner}" IN_LIST disttrain_detail_exceptions)
          list(APPEND detail_seen "${rel}: ${inner}")
        else()
          message(NOTICE "${rel}:${lineno}: forbidden include ${part} -> ${target}'s internals "
                         "(${inner}): include its public headers")
          math(EXPR bad "${bad} + 1")
          continue()
        endif()
      endif()
      if(NOT target IN_LIST allowed_${part})
        string(STRIP "${line}" what)
        string(REPLACE ";" " " may "${allowed_${part}}")
        if(may STREQUAL "")
          set(may "no other part")
        endif()
        # NOTICE: one unwrapped line per violation, file:line first.
        message(NOTICE "${rel}:${lineno}: forbidden include ${part} -> ${target} (${what}); "
                       "${part}/ may include: ${may}")
        math(EXPR bad "${bad} + 1")
      endif()
    endforeach()
  endforeach()
endforeach()

foreach(exception IN LISTS disttrain_detail_exceptions)
  string(REGEX REPLACE ":.*" "" header "${exception}")
  if(NOT exception IN_LIST detail_seen AND EXISTS "${SOURCE_DIR}/${header}")
    message(NOTICE "${exception}: listed in disttrain_detail_exceptions but no longer "
                   "included: delete the line (the list only shrinks)")
    math(EXPR bad "${bad} + 1")
  endif()
endforeach()

if(bad GREATER 0)
  message(FATAL_ERROR "${bad} disallowed part-to-part include(s); the graph is in "
                      "tests/packaging/part_layering.cmake")
endif()
message(STATUS "part layering: ${files} headers, ${edges} cross-part includes, all allowed")
