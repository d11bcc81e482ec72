# cmake -P script: compiles one source and succeeds only when the compiler FAILS and its output matches
# EXPECTED (a regex). Arguments: -DCOMPILER=... -DSOURCE=... -DEXPECTED=... -DFLAGS="a;b;c", and optionally
# -DMAX_ERRORS=n: fail when the compiler reports more than n `error:` lines (a rule chain owes one message).
execute_process(COMMAND ${COMPILER} ${FLAGS} ${SOURCE}
                RESULT_VARIABLE result OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(result EQUAL 0)
  message(FATAL_ERROR "${SOURCE} compiled, but it must be rejected with: ${EXPECTED}")
endif()
if(NOT "${out}${err}" MATCHES "${EXPECTED}")
  message(FATAL_ERROR "${SOURCE} was rejected, but not with the expected message `${EXPECTED}`:\n${out}${err}")
endif()
if(DEFINED MAX_ERRORS)
  string(REGEX MATCHALL "error:" errors "${out}${err}")
  list(LENGTH errors count)
  if(count GREATER MAX_ERRORS)
    message(FATAL_ERROR "${SOURCE} was rejected with ${count} errors, at most ${MAX_ERRORS} expected:\n${out}${err}")
  endif()
endif()
message(STATUS "rejected as expected: ${EXPECTED}")
