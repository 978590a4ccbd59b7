# -*- Python -*-
import glob
import os
import shutil

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "LOOM"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".loom", ".test"]
config.excludes = ["Inputs", "CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")

config.environment["FILECHECK_OPTS"] = "-enable-var-scope"
llvm_config.with_system_environment(["HOME", "LOOM_LONG", "TMPDIR"])
llvm_config.use_default_substitutions()
# `not`, `count`, `split-file` and FileCheck at the start of a RUN line.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

config.substitutions.append(("%loom_src", config.loom_src_root))
config.substitutions.append(("%loom_obj", config.loom_obj_root))
config.substitutions.append(("%examples", os.path.join(config.loom_src_root, "examples")))
config.substitutions.append(("%python", shutil.which("python3") or "python3"))

tool_dirs = [config.loom_tools_dir, config.llvm_tools_dir]
llvm_config.add_tool_substitutions(
    ["loomc", "loom-opt", "loomrt-safetensors", "loomrt-collectives-check",
     "loomrt-collectives-check-cuda", "loomrt-collectives-check-cuda-on-cpu",
     "loomrt-collectives-check-cuda-on-cpu-nccl", "loomrt-nccl-order-check-on-cpu",
     "loomrt-collectives-check-cuda-on-cpu-thread-sanitized"],
    tool_dirs)

# Python with the pinned test packages (numpy, safetensors), from scripts/setup.
venv_python = os.path.join(config.loom_src_root, ".venv", "bin", "python")
if os.path.exists(venv_python):
    config.available_features.add("venv")
    config.substitutions.append(("%venv_python", venv_python))
config.substitutions.append(("%mpirun", os.path.join(config.loom_src_root, "scripts", "mpirun-local")))
config.substitutions.append(("%runtime_tools", os.path.join(config.loom_src_root, "runtime", "tools")))
config.substitutions.append(("%cxx", shutil.which("clang++-22") or "clang++"))
if shutil.which("mpirun"):
    config.available_features.add("mpi")

nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
if nvcc and shutil.which("g++-12"):
    config.available_features.add("nvcc")
    config.substitutions.append(("%nvcc", nvcc))
# nvdisasm (scripts/setup installs NVIDIA's wheel of it): bench/gpu/sass
# counts the kernels' SASS instructions with it.
if nvcc and (shutil.which("nvdisasm") or glob.glob(os.path.join(
        config.loom_src_root, ".venv", "lib", "python3*", "site-packages",
        "nvidia", "cu*", "bin", "nvdisasm"))):
    config.available_features.add("nvdisasm")
# A GPU that runs CUDA: tests marked `REQUIRES: cuda` run generated CUDA.
import subprocess
try:
    if shutil.which("nvidia-smi") and subprocess.run(
            ["nvidia-smi", "-L"], capture_output=True, timeout=30).returncode == 0:
        config.available_features.add("cuda")
except (OSError, subprocess.TimeoutExpired):
    pass
if os.environ.get("LOOM_LONG") == "1":
    config.available_features.add("long")
