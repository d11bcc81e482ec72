# Warnings as errors for everything the project itself compiles (never forced on consumers).
add_library(unikv_warnings INTERFACE)
target_compile_options(unikv_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror>
  $<$<COMPILE_LANGUAGE:CUDA>:-Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
