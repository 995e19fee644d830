# cmake -DEXE=path -DARGS="--flag value ..." -DOUTPUT=file -P write_output.cmake
# runs EXE with its stdout in OUTPUT (a test fixture: add_test cannot redirect).
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${EXE} ${args} OUTPUT_FILE ${OUTPUT} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${EXE} ${ARGS} exited with ${rc}")
endif()
