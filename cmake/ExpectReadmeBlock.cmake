# cmake -P script: the README shows the code of an example, and this check keeps the two the same text.
# Arguments: -DREADME=<README.md> -DSOURCE=<example .cpp>. In SOURCE the shown part lies between the lines
# `// [readme]` and `// [/readme]`; in README it is the fenced block that follows the line
# `<!-- readme block: examples/<file name> -->`. Fails, printing both, unless they are equal character for character;
# with -DMAX_LINES=<n>, also when the block is longer than n lines.
get_filename_component(name ${SOURCE} NAME)
file(READ ${SOURCE} source)
file(READ ${README} readme)

function(_between text begin end out)
  string(FIND "${text}" "${begin}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "`${begin}` not found")
  endif()
  string(LENGTH "${begin}" skip)
  math(EXPR at "${at} + ${skip}")
  string(SUBSTRING "${text}" ${at} -1 rest)
  string(FIND "${rest}" "${end}" stop)
  if(stop EQUAL -1)
    message(FATAL_ERROR "`${end}` not found after `${begin}`")
  endif()
  string(SUBSTRING "${rest}" 0 ${stop} block)
  set(${out} "${block}" PARENT_SCOPE)
endfunction()

_between("${source}" "// [readme]\n" "// [/readme]\n" shown_in_source)
_between("${readme}" "<!-- readme block: examples/${name} -->\n```cpp\n" "```\n" shown_in_readme)
if(NOT shown_in_source STREQUAL shown_in_readme)
  message(FATAL_ERROR "README.md's block of examples/${name} differs from the file between its readme markers; "
                      "copy the file's block into the README.\n--- examples/${name}:\n${shown_in_source}"
                      "--- README.md:\n${shown_in_readme}")
endif()
if(DEFINED MAX_LINES)
  string(REGEX MATCHALL "\n" newlines "${shown_in_source}")
  list(LENGTH newlines lines)
  if(lines GREATER MAX_LINES)
    message(FATAL_ERROR "examples/${name}'s readme block is ${lines} lines, more than ${MAX_LINES}")
  endif()
endif()
message(STATUS "README.md shows examples/${name} as it is")
