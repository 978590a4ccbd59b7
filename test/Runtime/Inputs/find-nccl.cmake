# Runs cmake/LoomFindNccl.cmake with the given Python and toolkit directory,
# and without the system's default paths (this machine may have NCCL there).
include(${LOOM_SRC}/cmake/LoomFindNccl.cmake)
set(LOOM_NCCL_NO_DEFAULT_PATH ON)
set(LOOM_NCCL_TOOLKIT_DIRS ${TOOLKIT})
if(ROOT)
  set(LOOM_NCCL_ROOT ${ROOT})
endif()
loom_find_nccl(${PYTHON})
message("include: ${LOOM_NCCL_INCLUDE_DIR}")
message("library: ${LOOM_NCCL_LIBRARY}")
