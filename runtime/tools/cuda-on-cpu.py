#!/usr/bin/env python3
"""cuda-on-cpu.py IN.cu OUT.cpp

Turns a program that `loomc --target=cuda --emit=cuda` generated into host
C++ over unittests/CudaOnCpu.h, so that its kernels run on a machine
without a GPU: each `kernel<<<blocks, threads, shared, stream>>>(args);`
becomes a cuda_on_cpu::launch of the same kernel (as fibers when the kernel
has barriers), and the CUDA runtime header becomes the emulation's. Linked
with the CPU build of libloomrt, which implements the same ABI on host
memory, the program computes what the CUDA build computes with the CPU
runtime's library calls (GEMMs, norms, attention, collectives) and the
generated kernels' own code. test/Integration/cuda-on-cpu.test compares it
with the CPU build of the same model.
"""
import re
import sys

LAUNCH = re.compile(
    r"^(?P<indent>\s*)(?P<kernel>\w+)<<<(?P<blocks>[^,]+), (?P<threads>[^,]+), "
    r"(?P<shared>[^,]+), \(cudaStream_t\)loomrt_stream\(rt\)>>>\((?P<args>.*)\);"
    r"(?P<rest>.*)$")
KERNEL = re.compile(r"^__global__ void (\w+)\(")


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    source = open(sys.argv[1]).read()
    if "#include <cuda_runtime.h>" not in source:
        print(f"{sys.argv[1]}: not a program of loomc --emit=cuda", file=sys.stderr)
        return 1
    # Which kernels synchronise their threads (those run as fibers).
    barriers, current = {}, None
    for line in source.splitlines():
        match = KERNEL.match(line)
        if match:
            current = match.group(1)
            barriers[current] = False
        elif current and ("__syncthreads" in line or "__shfl" in line):
            barriers[current] = True
    out, launches = [], 0
    for line in source.splitlines():
        if line == "#include <cuda_runtime.h>":
            out.append('#include "CudaOnCpu.h"')
            continue
        match = LAUNCH.match(line)
        if match:
            kernel = match.group("kernel")
            if kernel not in barriers:
                print(f"{sys.argv[1]}: launch of an unknown kernel {kernel}", file=sys.stderr)
                return 1
            out.append(
                f"{match.group('indent')}cuda_on_cpu::launch({{unsigned({match.group('blocks')}), 1, 1}}, "
                f"{match.group('threads')}, {match.group('shared')}, [&] {{ {kernel}({match.group('args')}); }}, "
                f"{'true' if barriers[kernel] else 'false'});{match.group('rest')}")
            launches += 1
            continue
        if "<<<" in line:
            print(f"{sys.argv[1]}: a launch this tool does not know: {line.strip()}", file=sys.stderr)
            return 1
        out.append(line)
    open(sys.argv[2], "w").write("\n".join(out) + "\n")
    print(f"cuda-on-cpu: {len(barriers)} kernels, {launches} launches "
          f"({sum(barriers.values())} kernels with barriers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
