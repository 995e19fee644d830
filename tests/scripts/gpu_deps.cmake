# cmake -DSCRIPT=<gpu-deps.sh> -DWORK_DIR=<dir> -DGENERATOR=<gen> -P gpu_deps.cmake
# Bundles the dependencies with scripts/gpu-deps.sh into WORK_DIR/prefix,
# then configures, builds and runs a small consumer that finds nlohmann_json,
# Eigen3, fmt and Catch2 with CMake's system prefixes switched off: each
# package must come from the bundle (its *_DIR inside the prefix), and the program,
# linked against the bundle's libfmt, must run. This is what a GPU machine
# without packages gets (scripts/gpu-check.sh --deps).
foreach(var SCRIPT WORK_DIR GENERATOR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "gpu_deps.cmake: ${var} is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}/consumer")
set(prefix "${WORK_DIR}/prefix")
execute_process(COMMAND bash "${SCRIPT}" "${prefix}" RESULT_VARIABLE rc OUTPUT_VARIABLE out
                ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "gpu-deps.sh said: ${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu-deps.sh exited with '${rc}'")
endif()

file(WRITE "${WORK_DIR}/consumer/CMakeLists.txt" [=[
cmake_minimum_required(VERSION 3.25)
project(gpu_deps_consumer LANGUAGES CXX)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(fmt 9 REQUIRED)
find_package(Catch2 REQUIRED)
foreach(pkg nlohmann_json Eigen3 fmt Catch2)
  message(STATUS "found ${pkg} in ${${pkg}_DIR}")
  string(FIND "${${pkg}_DIR}" "${CMAKE_PREFIX_PATH}" at)
  if(NOT at EQUAL 0)
    message(FATAL_ERROR "${pkg} was found in ${${pkg}_DIR}, outside the bundle ${CMAKE_PREFIX_PATH}")
  endif()
endforeach()
add_executable(consumer main.cpp)
set_target_properties(consumer PROPERTIES CXX_STANDARD 20)
target_link_libraries(consumer PRIVATE nlohmann_json::nlohmann_json Eigen3::Eigen fmt::fmt
                                       Catch2::Catch2)
]=])
file(WRITE "${WORK_DIR}/consumer/main.cpp" [=[
#include <Eigen/Dense>
#include <catch2/catch.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>
int main() {
  Eigen::Vector2d v(3, 4);
  const auto j = nlohmann::json{{"norm", v.norm()}};
  fmt::print("{}\n", j.dump());
  return j["norm"].get<double>() == 5.0 ? 0 : 1;
}
]=])
execute_process(
  COMMAND ${CMAKE_COMMAND} -S "${WORK_DIR}/consumer" -B "${WORK_DIR}/consumer/build"
          -G "${GENERATOR}" -DCMAKE_PREFIX_PATH=${prefix}
          -DCMAKE_FIND_USE_CMAKE_SYSTEM_PATH=OFF
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 120)
message(STATUS "configure: ${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer did not configure against the bundle")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build "${WORK_DIR}/consumer/build"
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 300)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the consumer did not build against the bundle:\n${out}${err}")
endif()
execute_process(COMMAND "${WORK_DIR}/consumer/build/consumer" RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
if(NOT rc EQUAL 0 OR NOT out MATCHES "\"norm\":5")
  message(FATAL_ERROR "the consumer ran with '${rc}': ${out}${err}")
endif()
message(STATUS "the bundle is complete and relocatable: ${out}")
