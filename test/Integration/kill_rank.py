#!/usr/bin/env python3
"""Starts `MPIRUN -np N PROGRAM ARGS...`, kills one rank with SIGKILL once
all ranks run, and reports how the job ended: it must end (not hang) with a
non-zero exit code. Prints the job's output, then `exit: CODE`."""

import os
import signal
import subprocess
import sys
import time

mpirun, np, program, *args = sys.argv[1:]
job = subprocess.Popen([mpirun, "-np", np, program, *args],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def ranks():
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if argv and argv[0].decode(errors="replace") == program:
            found.append(int(pid))
    return sorted(found)


deadline = time.time() + 60
while len(ranks()) < int(np) and time.time() < deadline:
    time.sleep(0.1)
time.sleep(0.5)
victims = ranks()
if not victims:
    print("kill_rank: no rank started")
    sys.exit(1)
os.kill(victims[-1], signal.SIGKILL)
try:
    output, _ = job.communicate(timeout=120)
except subprocess.TimeoutExpired:
    job.kill()
    print("kill_rank: the job hung after a rank was killed")
    sys.exit(1)
sys.stdout.write(output.decode(errors="replace"))
print(f"exit: {job.returncode}")
