#!/usr/bin/env python3
"""cuda-on-cpu.py IN.cu OUT.cpp
cuda-on-cpu.py --build OBJ_DIR [--cxx CXX] [--nccl] [--sanitize[=thread]] PROGRAM.cu EXECUTABLE

Turns CUDA source of this project (a program that `loomc --target=cuda
--emit=cuda` generated, or libloomrt's runtime/cuda/Kernels.cu) into host
C++ over runtime/emulation/CudaRuntimeOnCpu.h, so that it runs on a machine without
a GPU: each `kernel<<<grid, block, shared, stream>>>(args);` becomes a
cuda_on_cpu::launch of the same kernel with its arguments held by value
(recorded while its stream is captured into a CUDA graph), and the CUDA
headers become the emulation's.

A generated program linked with the CPU build of libloomrt (the same ABI on
host memory) computes what its CUDA build computes with the CPU runtime's
library calls; linked with Kernels.cu turned into host C++ (the
loomrt_cuda_on_cpu library), it runs the CUDA backend's own code.
test/Integration/cuda-on-cpu.test compares both with the CPU builds.

With --build, PROGRAM.cu (from loomc --target=cuda --emit=cuda) is turned
into EXECUTABLE.cpp and built into EXECUTABLE with that library from the
build directory OBJ_DIR. With --nccl as well, the library is
loomrt_cuda_on_cpu_nccl: Open MPI and the NCCL transport over
runtime/emulation/NcclOnCpu.h, so that the program runs a rank per process under
mpirun (LOOM_CUDA_ON_CPU_GPUS=N gives each machine N emulated GPUs).
Sources that include <nccl.h> (runtime/cuda/Nccl.cpp) get NcclOnCpu.h.
With --sanitize, the program and the library (loomrt_cuda_on_cpu_sanitized,
or loomrt_cuda_on_cpu_nccl_sanitized with --nccl; libloomrt_core's sources
included) are built with AddressSanitizer and UBSan, so that an access
beyond a buffer (a kernel's, or the NCCL transport's), or undefined
behaviour, stops the run with a report. With --sanitize=thread, they are
built with ThreadSanitizer instead (loomrt_cuda_on_cpu_thread_sanitized),
which reports accesses of the loopback mode's ranks, threads of one
process, that nothing orders (a data race); not with --nccl, whose ranks
are processes.
"""
import os
import subprocess
import re
import sys

CUDA_HEADERS = re.compile(r"^#include <(cuda_runtime|cublasLt|cublas_v2|cuda_bf16|cuda_fp16|mma)\.h>$")


def split_top(text, separator=","):
    """Splits at separators outside parentheses, brackets and braces."""
    parts, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == separator and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def matching(source, i, opening, closing, step):
    """The index of the bracket that closes the one at i, walking by step."""
    depth = 0
    while True:
        if source[i] == opening:
            depth += 1
        elif source[i] == closing:
            depth -= 1
            if depth == 0:
                return i
        i += step


def kernel_start(source, end):
    """Where the kernel expression before `<<<` at `end` starts: a name,
    possibly qualified, possibly with template arguments."""
    i = end
    while i > 0 and source[i - 1].isspace():
        i -= 1
    if source[i - 1] == ">":  # template arguments
        i = matching(source, i - 1, ">", "<", -1)
    while i > 0 and (source[i - 1].isalnum() or source[i - 1] in "_:"):
        i -= 1
    return i


def transform(source, path):
    out, pos, launches = [], 0, 0
    while True:
        open_at = source.find("<<<", pos)
        if open_at < 0:
            break
        start = kernel_start(source, open_at)
        kernel = " ".join(source[start:open_at].split())
        close_at = source.find(">>>", open_at)
        config = split_top(source[open_at + 3:close_at])
        i = close_at + 3
        while source[i].isspace():
            i += 1
        if source[i] != "(" or len(config) < 2:
            raise SystemExit(f"{path}: a launch this tool does not know near: "
                             f"{source[start:close_at + 3]}")
        j = matching(source, i, "(", ")", 1)
        args = " ".join(source[i + 1:j].split())
        grid, block = config[0], config[1]
        shared = config[2] if len(config) > 2 else "0"
        stream = config[3] if len(config) > 3 else "nullptr"
        out.append(source[pos:start])
        out.append(f"cuda_on_cpu::launch((cuda_on_cpu::Stream *)({stream}), cuda_on_cpu::Dim3({grid}), "
                   f"cuda_on_cpu::Dim3({block}), size_t({shared}), [=] {{ {kernel}({args}); }})")
        pos = j + 1
        launches += 1
    out.append(source[pos:])
    # The emulation first, before the project's headers that use CUDA.
    lines, included = ['#include "CudaRuntimeOnCpu.h"'], False
    for line in "".join(out).splitlines():
        if CUDA_HEADERS.match(line):
            included = True
            continue
        if line == "#include <nccl.h>":
            line = '#include "NcclOnCpu.h"'
        lines.append(line)
    if not included and '#include "NcclOnCpu.h"' not in lines:
        raise SystemExit(f"{path}: includes no CUDA header; not CUDA source of this project")
    text = "\n".join(lines) + "\n"
    if "return loomrt_main(" in text:
        # A generated program may link the CPU libloomrt, which has no
        # streams; the CUDA backend's definition wins where it is linked.
        text += ('extern "C" __attribute__((weak)) void *loomrt_stream(loomrt_ctx *) '
                 '{ return nullptr; }\n')
    return text, launches


def main() -> int:
    args = sys.argv[1:]
    obj, cxx, nccl, sanitize = None, os.environ.get("CXX", "clang++"), False, False
    while args and (args[0] in ("--nccl", "--sanitize", "--sanitize=thread")
                    or (args[0] in ("--build", "--cxx") and len(args) > 1)):
        if args[0] == "--nccl":
            nccl, args = True, args[1:]
            continue
        if args[0].startswith("--sanitize"):
            sanitize, args = "thread" if args[0].endswith("=thread") else "address", args[1:]
            continue
        if args[0] == "--build":
            obj = args[1]
        else:
            cxx = args[1]
        args = args[2:]
    if len(args) != 2 or ((nccl or sanitize) and not obj):
        print(__doc__, file=sys.stderr)
        return 2
    if nccl and sanitize == "thread":
        print("cuda-on-cpu.py: --sanitize=thread is for the loopback mode, whose ranks are threads; "
              "with --nccl they are processes (use --sanitize)", file=sys.stderr)
        return 2
    source, target = args
    host = target + ".cpp" if obj else target
    text, launches = transform(open(source).read(), source)
    open(host, "w").write(text)
    if not obj:
        print(f"cuda-on-cpu: {source}: {launches} launches")
        return 0
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    library = "loomrt_cuda_on_cpu_nccl" if nccl else "loomrt_cuda_on_cpu"
    more, flags = [], []
    if nccl:
        with open(os.path.join(obj, "lib", library + ".link")) as f:
            more = f.read().split()
    libraries = [os.path.join(obj, "lib", f"lib{library}.a"), os.path.join(obj, "lib", "libloomrt_core.a")]
    if sanitize:
        library += "_thread_sanitized" if sanitize == "thread" else "_sanitized"
        with open(os.path.join(obj, "lib", library.replace("_nccl", "") + ".flags")) as f:
            flags = ["-g", *f.read().split()]
        libraries = [os.path.join(obj, "lib", f"lib{library}.a")]
    command = [cxx, "-std=c++17", "-O1", "-ffp-contract=off", "-fno-math-errno", "-w", *flags,
               "-I", os.path.join(root, "runtime", "include"), "-I", os.path.join(root, "runtime", "emulation"),
               "-I", root, host, *libraries, *more, "-lm", "-lpthread", "-o", target]
    return subprocess.run(command).returncode


if __name__ == "__main__":
    sys.exit(main())
