# cmake -P build_and_test.cmake: like `ctest --build-and-test`, but the build
# keeps going after the first failure (ninja -k 0 / make -k) so that one run
# reports every header that does not compile.
#   -DSOURCE_DIR -DBINARY_DIR -DGENERATOR -DCTEST_COMMAND [-DOPTIONS=<,-separated -D options>]
include("${CMAKE_CURRENT_LIST_DIR}/script_common.cmake")
disttrain_require_vars(build_and_test.cmake SOURCE_DIR BINARY_DIR GENERATOR CTEST_COMMAND)
string(REPLACE "," ";" options "${OPTIONS}")
disttrain_run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}" -B "${BINARY_DIR}" -G "${GENERATOR}" ${options})
if(GENERATOR STREQUAL "Ninja")
  set(keep_going -- -k 0)
elseif(GENERATOR MATCHES "Makefiles")
  set(keep_going -- -k)
else()
  set(keep_going)
endif()
disttrain_run("${CMAKE_COMMAND}" --build "${BINARY_DIR}" ${keep_going})
disttrain_run("${CTEST_COMMAND}" --test-dir "${BINARY_DIR}" --output-on-failure)
