"""What bench/gpu/run leaves in its output folder, read back: the helpers
that bench/gpu/table and bench/gpu/best share."""
import json
import re


def median(path):
    """The median step of a --bench run's output file, in ms, or None."""
    m = re.search(r"median step ([0-9.]+) ms", path.read_text()) if path.exists() else None
    return float(m.group(1)) if m else None


def passes_json(content):
    """A check that printed one JSON line with "ok": true."""
    try:
        return json.loads(content.splitlines()[0]).get("ok") is True
    except (ValueError, IndexError, AttributeError):
        return False


def passed(path):
    """passes_json of a check's output file; False when it is missing."""
    return path.exists() and passes_json(path.read_text())
