# cmake -P script: keeps a source file short. Arguments: -DFILE=<path> -DMAX_LINES=<n>. Fails, naming both counts,
# when FILE has more than n lines; every line counts, blank and comment lines included (as `wc -l`, plus a last
# line without its newline).
if(NOT DEFINED FILE OR NOT DEFINED MAX_LINES)
  message(FATAL_ERROR "ExpectMaxLines.cmake: give -DFILE=<path> -DMAX_LINES=<n>")
endif()
file(READ "${FILE}" text)
string(REGEX REPLACE "[^\n]" "" newlines "${text}")
string(LENGTH "${newlines}" lines)
if(NOT text STREQUAL "" AND NOT text MATCHES "\n$")
  math(EXPR lines "${lines} + 1")
endif()
get_filename_component(name "${FILE}" NAME)
if(lines GREATER MAX_LINES)
  message(FATAL_ERROR "${name} has ${lines} lines, more than its limit of ${MAX_LINES}; shorten it")
endif()
message(STATUS "${name}: ${lines} of at most ${MAX_LINES} lines")
