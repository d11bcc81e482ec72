# Test helpers. Everything is glob-driven so adding a test, a compile-fail case or a header needs no CMake edit;
# CONFIGURE_DEPENDS makes a rebuild pick new files up.

# Writes one translation unit per header (the header included twice, to check its include guard) and returns
# the generated file names in `out`.
function(_unikv_header_units extension out)
  set(units)
  foreach(h IN LISTS ARGN)
    string(MAKE_C_IDENTIFIER "${h}" id)
    set(unit ${CMAKE_BINARY_DIR}/header_check/${id}.${extension})
    file(CONFIGURE OUTPUT ${unit} CONTENT "#include <${h}>\n#include <${h}>\n")
    list(APPEND units ${unit})
  endforeach()
  set(${out} ${units} PARENT_SCOPE)
endfunction()

# Every .hpp under `root`/`folder` compiles alone with the C++ compiler, in the OBJECT library `target` that
# links the libraries given after `folder` (their include paths and definitions).
function(unikv_add_hpp_header_check target root folder)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE ${root} ${root}/${folder}/*.hpp)
  _unikv_header_units(cpp units ${headers})
  add_library(${target} OBJECT ${units})
  target_link_libraries(${target} PRIVATE ${ARGN} unikv_warnings)
  # A header alone instantiates nothing, so its unit is parsing; nothing links the objects, so they need neither
  # optimization nor debug information (-O0 -g0 cut unikv/cache/hicache.hpp's check from 5.5 to 4.9 CPU-s).
  target_compile_options(${target} PRIVATE -O0 -g0)
  set(${target}_headers ${headers} PARENT_SCOPE)
endfunction()

# Every header under include/unikv compiles alone: .hpp with the C++ compiler and no CUDA include path;
# with UNIKV_ENABLE_CUDA, .cuh and .hpp with nvcc. The simulator's headers have their own check (sim/).
function(unikv_add_header_checks)
  set(root ${PROJECT_SOURCE_DIR}/include)
  unikv_add_hpp_header_check(unikv_header_check_hpp ${root} unikv unikv::unikv)
  set(hpp_headers ${unikv_header_check_hpp_headers})
  if(UNIKV_ENABLE_CUDA)
    # Engines include the .hpp headers from .cu files too, so nvcc must accept every header. Each .cuh, and
    # each .hpp that reads differently under nvcc (it tests __CUDACC__ or UNIKV_HAS_CUDA), compiles alone; the
    # other .hpp preprocess the same under both compilers, so g++ above proves each is self-contained and nvcc
    # compiles them all in one unit: nvcc parses a unit three times (cudafe++, cicc, the host compiler), a
    # few CPU-seconds per header even for a small one, which one unit per header multiplied by sixty.
    file(GLOB_RECURSE cuh_headers CONFIGURE_DEPENDS RELATIVE ${root} ${root}/unikv/*.cuh)
    set(nvcc_alone ${cuh_headers})
    set(nvcc_together "")
    foreach(h IN LISTS hpp_headers)
      file(READ ${root}/${h} text)
      if(text MATCHES "__CUDACC__|UNIKV_HAS_CUDA")
        list(APPEND nvcc_alone ${h})
      else()
        string(APPEND nvcc_together "#include <${h}>\n")
      endif()
    endforeach()
    _unikv_header_units(cu cuh_units ${nvcc_alone})
    set(together_unit ${CMAKE_BINARY_DIR}/header_check/unikv_host_headers_together.cu)
    file(CONFIGURE OUTPUT ${together_unit} CONTENT "${nvcc_together}")
    add_library(unikv_header_check_cuh OBJECT ${cuh_units} ${together_unit})
    target_link_libraries(unikv_header_check_cuh PRIVATE unikv::unikv unikv_warnings)
  endif()
endfunction()

# One doctest binary per component folder: tests/<component>/*_test.cpp -> test_<component>.
function(unikv_add_component_tests component)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/${component}/*_test.cpp)
  if(NOT sources)
    return()
  endif()
  add_executable(test_${component} ${sources})
  # Code generation dominates the build of a test (each instantiates the allocator and tree for several
  # layouts) and every suite runs in seconds, so tests get their own optimization level, appended after the
  # preset's flags (benchmarks keep the preset's). Measured on allocation_test.cpp (CPU seconds): -O2 -g 52,
  # -O1 -g1 29; with ASan+UBSan -O1 -g1 122, -O0 -g1 43. Line tables (-g1) are enough for sanitizer reports.
  if(UNIKV_SANITIZE_TESTS)
    set(sanitizers -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
    target_compile_options(test_${component} PRIVATE -O0 -g1 ${sanitizers})
    target_link_options(test_${component} PRIVATE ${sanitizers})
  else()
    target_compile_options(test_${component} PRIVATE -O1 -g1)
  endif()
  # Unity batches of UNIKV_TEST_UNITY_BATCH files: the files of a folder instantiate the same allocator, tree,
  # executor and layout types, which a unit per file compiles again each time (tests/cache/move_test.cpp, 15
  # lines, cost 44 CPU-s alone). Files keep their own names in diagnostics; names at namespace scope are shared
  # across a batch, so two files must not define the same one (1 builds a unit per file).
  if(UNIKV_TEST_UNITY_BATCH GREATER 1)
    set_target_properties(test_${component} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE ${UNIKV_TEST_UNITY_BATCH})
  endif()
  target_link_libraries(test_${component} PRIVATE unikv::unikv unikv_warnings unikv_doctest_main)
  target_include_directories(test_${component} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  add_test(NAME ${component} COMMAND test_${component})
  set_tests_properties(${component} PROPERTIES LABELS unit)
endfunction()

# Compile-fail tests: tests/compile_fail/<name>.cpp whose first line is `// expect: <regex>`.
# The test passes only when compiling the file fails AND prints a message matching the regex (a static_assert
# or a deleted/ill-formed use). A file that mentions UNIKV_COMPILE_FAIL_CONTROL also gets a `<name>_control` test:
# compiled with that macro defined, the file must build, which proves the failure comes from the one bad line.
function(unikv_add_compile_fail_tests)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/compile_fail/*.cpp)
  set(flags -std=c++20 -Wall -Wextra -Wpedantic -Werror -I${PROJECT_SOURCE_DIR}/include)
  # Each of the ~140 compiles parsed the library again (2 to 5 CPU-s each, unikv/cache.hpp's the most): the
  # umbrella header precompiled once with the same flags (about 14 CPU-s) leaves each about 1.3, loading it.
  # A test still fails on its own bad line, as its control proves; -Winvalid-pch (an error under -Werror)
  # keeps a stale or mismatched PCH from being skipped silently. Before the build made it, gcc reads the
  # header as text, slower but the same.
  set(pch ${CMAKE_CURRENT_BINARY_DIR}/compile_fail_pch/unikv_all.hpp)
  file(CONFIGURE OUTPUT ${pch} CONTENT "#include <unikv/unikv.hpp>\n")
  add_custom_command(OUTPUT ${pch}.gch
    COMMAND ${CMAKE_CXX_COMPILER} ${flags} -x c++-header ${pch} -o ${pch}.gch -MD -MT ${pch}.gch -MF ${pch}.d
    DEPENDS ${pch} DEPFILE ${pch}.d COMMENT "Precompiling the umbrella header for the compile-fail tests")
  add_custom_target(unikv_compile_fail_pch ALL DEPENDS ${pch}.gch)
  list(APPEND flags -fsyntax-only -Winvalid-pch -include ${pch})
  foreach(src IN LISTS sources)
    get_filename_component(name ${src} NAME_WE)
    file(STRINGS ${src} first_line LIMIT_COUNT 1)
    if(NOT first_line MATCHES "^// expect: (.+)$")
      message(FATAL_ERROR "${src}: the first line must be `// expect: <regex>`")
    endif()
    set(expected "${CMAKE_MATCH_1}")
    # The layout, host-pool, retraction, preset, budget and cache rules are guarded chains (check_layout,
    # check_host_pool, check_retraction, check_preset, check_budget, check_cache_policies) and the allocator's
    # per-call layout checks stop at their assert: each owes one error.
    set(max_errors "")
    if(name MATCHES "^(layout|allocator|host|retraction|preset|budget|cache)_")
      set(max_errors -DMAX_ERRORS=1)
    endif()
    add_test(NAME compile_fail.${name}
      COMMAND ${CMAKE_COMMAND} -DCOMPILER=${CMAKE_CXX_COMPILER} -DSOURCE=${src} "-DEXPECTED=${expected}"
              "-DFLAGS=${flags}" ${max_errors} -P ${PROJECT_SOURCE_DIR}/cmake/ExpectCompileFailure.cmake)
    set_tests_properties(compile_fail.${name} PROPERTIES LABELS compile_fail)
    file(READ ${src} text)
    if(text MATCHES "UNIKV_COMPILE_FAIL_CONTROL")
      add_test(NAME compile_fail.${name}_control
        COMMAND ${CMAKE_CXX_COMPILER} ${flags} -DUNIKV_COMPILE_FAIL_CONTROL ${src})
      set_tests_properties(compile_fail.${name}_control PROPERTIES LABELS compile_fail)
    endif()
  endforeach()
endfunction()
