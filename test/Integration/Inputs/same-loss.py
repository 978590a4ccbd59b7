"""same-loss.py TOLERANCE FILE...: every file's `loss = X` line agrees with
the first's within TOLERANCE relative; exits 1 (naming the file) if not."""
import re
import sys


def loss(path):
    match = re.search(r"^loss = (\S+)", open(path).read(), re.M)
    if not match:
        sys.exit(f"{path}: no 'loss = ' line")
    return float(match.group(1))


tolerance, paths = float(sys.argv[1]), sys.argv[2:]
reference = loss(paths[0])
for path in paths[1:]:
    value = loss(path)
    if abs(value - reference) > tolerance * abs(reference):
        sys.exit(f"{path}: loss {value} differs from {reference} by more than {tolerance} relative")
    print(f"{path}: loss {value} (reference {reference})")
