# cmake -P module_lines.cmake -DSOURCE_DIR=...: fails if a line of a public
# header or a kernel source starts with the word `module`, `import` or
# `export`. nvcc in C++20 mode reads such a line as a module directive and
# rejects it (-Werror), e.g. a formatter wrapping `std::array<int, 3>
# module{};` after the type. The nvcc header test catches this too, but only
# where nvcc is installed; this check runs everywhere.
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(module_lines.cmake SOURCE_DIR)
file(GLOB_RECURSE sources "${SOURCE_DIR}/include/*.hpp" "${SOURCE_DIR}/kernels/*.cu"
     "${SOURCE_DIR}/kernels/*.cuh")
set(bad 0)
foreach(f IN LISTS sources)
  file(STRINGS "${f}" lines REGEX "^[ \t]*(module|import|export)([ \t;:{(<]|$)")
  foreach(line IN LISTS lines)
    file(RELATIVE_PATH rel "${SOURCE_DIR}" "${f}")
    message(SEND_ERROR "${rel}: a line starts with a C++20 module keyword (nvcc rejects it): ${line}")
    math(EXPR bad "${bad} + 1")
  endforeach()
endforeach()
list(LENGTH sources n)
if(bad GREATER 0)
  message(FATAL_ERROR "${bad} line(s) start with module/import/export")
endif()
message(STATUS "module keyword lines: none in ${n} files")
