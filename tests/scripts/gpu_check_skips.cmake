# cmake -DSCRIPT=<gpu-check.sh> -DWORK_DIR=<dir> -P gpu_check_skips.cmake
# Runs the script as if no GPU existed and checks: exit status 0, the words
# "no GPU" on its output, and a summary in $OUT/gpu-check.json that says
# "status": "skipped" and is one JSON object.
foreach(var SCRIPT WORK_DIR)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "gpu_check_skips.cmake: ${var} is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
execute_process(
  COMMAND ${CMAKE_COMMAND} -E env OUT=${WORK_DIR} DISTTRAIN_GPU_CHECK_NO_GPU=1 bash "${SCRIPT}"
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
message(STATUS "gpu-check.sh said:\n${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gpu-check.sh without a GPU exited with '${rc}', expected 0")
endif()
if(NOT out MATCHES "no GPU")
  message(FATAL_ERROR "gpu-check.sh without a GPU did not say 'no GPU'")
endif()
set(summary "${WORK_DIR}/gpu-check.json")
if(NOT EXISTS "${summary}")
  message(FATAL_ERROR "gpu-check.sh wrote no summary at ${summary}")
endif()
file(READ "${summary}" json)
string(JSON status ERROR_VARIABLE json_error GET "${json}" status)
if(json_error)
  message(FATAL_ERROR "${summary} is not valid JSON: ${json_error}\n${json}")
endif()
if(NOT status STREQUAL "skipped")
  message(FATAL_ERROR "${summary}: status is '${status}', expected 'skipped'")
endif()
message(STATUS "gpu-check.sh skips cleanly without a GPU")
