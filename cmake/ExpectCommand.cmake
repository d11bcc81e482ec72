# cmake -P script: runs a program and succeeds only when it exits with EXIT_CODE and its output (stdout and
# stderr together) matches EXPECTED (a regex). Arguments: -DPROGRAM=... -DARGS="a|b|c" (`|` separates them, so a
# list survives add_test) -DEXIT_CODE=n -DEXPECTED=... -DWORKING_DIRECTORY=...
string(REPLACE "|" ";" args "${ARGS}")
string(REPLACE "|" " " shown "${ARGS}")
execute_process(COMMAND ${PROGRAM} ${args} WORKING_DIRECTORY ${WORKING_DIRECTORY}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT "${result}" STREQUAL "${EXIT_CODE}")
  message(FATAL_ERROR "`${PROGRAM} ${shown}` exited with ${result}, expected ${EXIT_CODE}:\n${out}${err}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECTED}")
  message(FATAL_ERROR "`${PROGRAM} ${shown}` printed no match for `${EXPECTED}`:\n${out}${err}")
endif()
message(STATUS "exit ${result} and output as expected: ${EXPECTED}")
