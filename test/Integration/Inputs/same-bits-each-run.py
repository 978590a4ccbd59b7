"""Runs a command several times and checks that each run writes a file equal,
byte for byte, to a reference: for races that show on some runs only.

    same-bits-each-run.py --times N --reference REF --output OUT -- COMMAND...
"""
import argparse
import filecmp
import subprocess
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--times", type=int, required=True)
    parser.add_argument("--reference", required=True)
    parser.add_argument("--output", required=True, help="the file COMMAND writes")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command or args.times < 1:
        parser.error("give --times N >= 1 and a command after --")
    for run in range(1, args.times + 1):
        done = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if done.returncode:
            print(f"run {run} of {args.times} exited with {done.returncode}:\n{done.stderr[-4000:]}")
            return 1
        if not filecmp.cmp(args.reference, args.output, shallow=False):
            print(f"run {run} of {args.times}: {args.output} differs from {args.reference}")
            return 1
    print(f"{args.times} runs, each equal to {args.reference}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
