# cmake -P script: every header under INCLUDE_DIR/HEADERS, preprocessed alone, pulls in (directly or not) no
# header whose path matches FORBIDDEN (a regex): a layering rule. Arguments: -DCOMPILER=... -DINCLUDE_DIR=...
# -DHEADERS=unikv/arena -DFORBIDDEN=...
file(GLOB_RECURSE headers ${INCLUDE_DIR}/${HEADERS}/*.hpp)
if(NOT headers)
  message(FATAL_ERROR "no headers under ${INCLUDE_DIR}/${HEADERS}")
endif()
foreach(header IN LISTS headers)
  execute_process(COMMAND ${COMPILER} -std=c++20 -I${INCLUDE_DIR} -M -x c++ ${header}
                  RESULT_VARIABLE result OUTPUT_VARIABLE deps ERROR_VARIABLE err)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "${header} does not preprocess alone:\n${err}")
  endif()
  if(deps MATCHES "${FORBIDDEN}")
    message(FATAL_ERROR "${header} includes a header matching `${FORBIDDEN}` (${CMAKE_MATCH_0}); it must not:\n${deps}")
  endif()
endforeach()
list(LENGTH headers count)
message(STATUS "${count} headers under ${HEADERS} include nothing matching ${FORBIDDEN}")
