# loom_find_nccl(PYTHON...): finds NCCL for libloomrt's CUDA backend and sets
# LOOM_NCCL_INCLUDE_DIR and LOOM_NCCL_LIBRARY (cache; -NOTFOUND when absent).
# Looked for, in order: LOOM_NCCL_ROOT/{include,lib}; the CUDA toolkit
# (LOOM_NCCL_TOOLKIT_DIRS); the nvidia-nccl wheel's nvidia/nccl/{include,lib}
# of the first of the given Python interpreters that can import it; then the
# system's default paths unless LOOM_NCCL_NO_DEFAULT_PATH is set.
function(loom_find_nccl)
  set(wheels "")
  foreach(python ${ARGN})
    execute_process(COMMAND ${python} -c
      "import nvidia.nccl as n; print(list(n.__path__)[0])"
      OUTPUT_VARIABLE wheel OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET
      RESULT_VARIABLE failed)
    if(NOT failed AND wheel)
      list(APPEND wheels ${wheel})
    endif()
  endforeach()
  set(no_default "")
  if(LOOM_NCCL_NO_DEFAULT_PATH)
    set(no_default NO_DEFAULT_PATH)
  endif()
  set(roots "")
  if(LOOM_NCCL_ROOT)
    list(APPEND roots ${LOOM_NCCL_ROOT})
  endif()
  find_path(LOOM_NCCL_INCLUDE_DIR nccl.h
    HINTS ${roots} ${LOOM_NCCL_TOOLKIT_DIRS} PATHS ${wheels}
    PATH_SUFFIXES include ${no_default})
  find_library(LOOM_NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS ${roots} ${LOOM_NCCL_TOOLKIT_DIRS} PATHS ${wheels}
    PATH_SUFFIXES lib lib64 ${no_default})
endfunction()
