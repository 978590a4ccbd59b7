#!/usr/bin/env python3
"""Seeded, deterministic robustness run of `loomrt-safetensors check`.

Builds valid safetensors files itself (and takes one from `loomrt-safetensors
write`), then feeds the tool mutated variants of them: byte flips,
truncations at every kind of position, changed header lengths, JSON edits
(wrong dtypes, bad shape entries, overlapping, gapped and out-of-range
offsets, missing, extra and duplicate keys, duplicate names, invalid UTF-8,
deep nesting, syntax errors) and odd whole files (empty, 7 bytes, garbage).

A run fails when the tool ends by a signal, exits with a code other than 0
or 1, exits 1 without a one-line `loomrt-safetensors: error:` message, takes
longer than the timeout, or disagrees with the reference checker below (a
plain-Python statement of the rules the safetensors package applies, plus
Loom's stricter ones) about whether the file is valid. A few fixed cases
must also fail with a message naming the problem (truncat, dtype, overlap,
cover, ...). Failing inputs are copied to --crash-dir.
"""

import argparse
import concurrent.futures
import json
import os
import random
import shutil
import struct
import subprocess
import sys
import tempfile
import time

MAX_HEADER = 100_000_000
DTYPE_SIZES = {"F32": 4, "BF16": 2, "F16": 2, "I32": 4, "I64": 8}
VALID = "valid"  # the expectation of a fixed case that must be accepted


class Obj(list):
    """A JSON object as a list of (key, value) pairs, so that duplicate keys
    can be written and read back."""


class Raw(bytes):
    """JSON text inserted verbatim (bad numbers, escapes, nesting)."""


class Bad:
    """A number that may not stand where a count or offset is expected."""

    def __init__(self, text):
        self.text = text


def dump_json(value):
    if isinstance(value, Raw):
        return bytes(value)
    if isinstance(value, Obj):
        return b"{" + b",".join(dump_json(key) + b":" + dump_json(item) for key, item in value) + b"}"
    if isinstance(value, list):
        return b"[" + b",".join(dump_json(item) for item in value) + b"]"
    return json.dumps(value, ensure_ascii=False).encode("utf-8")


def pack(header, data, pad=True, length=None):
    """The file for a header (an Obj, or raw JSON bytes) and a data section."""
    text = header if isinstance(header, bytes) else dump_json(header)
    if pad:
        text += b" " * (-(8 + len(text)) % 8)
    return struct.pack("<Q", len(text) if length is None else length) + text + data


# ----------------------------------------------------------------------------
# Reference checker


def reference(data):
    """(valid, number of tensors) by the rules of Safetensors.h."""
    if len(data) < 8:
        return False, 0
    size = struct.unpack("<Q", data[:8])[0]
    if size > MAX_HEADER or 8 + size > len(data):
        return False, 0
    try:
        text = data[8:8 + size].decode("utf-8")
        root = json.loads(text, object_pairs_hook=Obj, parse_int=lambda t: Bad(t) if t.startswith("-") else int(t),
                          parse_float=Bad, parse_constant=Bad)
    except (ValueError, RecursionError):
        return False, 0
    if not strings_encode(root) or not isinstance(root, Obj):
        return False, 0
    names, seen_metadata, regions = set(), False, []
    for name, entry in root:
        if name == "__metadata__":
            if seen_metadata:
                return False, 0
            seen_metadata = True
            if entry is None:
                continue
            if not isinstance(entry, Obj) or not all(isinstance(v, str) for _, v in entry):
                return False, 0
            if len({k for k, _ in entry}) != len(entry):
                return False, 0
            continue
        if name in names or not isinstance(entry, Obj):
            return False, 0
        names.add(name)
        if sorted(k for k, _ in entry) != ["data_offsets", "dtype", "shape"]:
            return False, 0
        fields = dict(entry)
        dtype, shape, offsets = fields["dtype"], fields["shape"], fields["data_offsets"]
        if not isinstance(dtype, str) or dtype not in DTYPE_SIZES or type(shape) is not list:
            return False, 0
        elements = 1
        for dim in shape:
            if not is_count(dim, 2**63 - 1):
                return False, 0
            elements *= dim
            if elements >= 2**64:
                return False, 0
        if elements * DTYPE_SIZES[dtype] >= 2**64:
            return False, 0
        if type(offsets) is not list or len(offsets) != 2 or not all(is_count(o, 2**64 - 1) for o in offsets):
            return False, 0
        begin, end = offsets
        if end < begin or end - begin != elements * DTYPE_SIZES[dtype]:
            return False, 0
        regions.append((begin, end))
    covered = 0
    for begin, end in sorted(regions):
        if begin != covered:
            return False, 0
        covered = end
    return covered == len(data) - 8 - size, len(regions)


def is_count(value, limit):
    return type(value) is int and 0 <= value <= limit


def strings_encode(value):
    """Whether every string has a UTF-8 form (json accepts lone surrogates
    written as \\u escapes; safetensors and Loom do not)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, Obj):
            for key, sub in item:
                stack.extend((key, sub))
        elif isinstance(item, list):
            stack.extend(item)
    return True


# ----------------------------------------------------------------------------
# Seeds


def layout(tensors, metadata=None, order=None):
    """(header Obj, data) for [(name, dtype, shape, bytes)] laid out in order;
    `order` permutes the JSON entries (offsets stay in data order)."""
    entries, data = [], b""
    for name, dtype, shape, payload in tensors:
        offsets = [len(data), len(data) + len(payload)]
        entries.append((name, Obj([("dtype", dtype), ("shape", list(shape)), ("data_offsets", offsets)])))
        data += payload
    if order:
        entries = [entries[i] for i in order]
    header = Obj([("__metadata__", Obj(sorted(metadata.items())))] if metadata else [])
    header.extend(entries)
    return header, data


def every_dtype():
    return layout([
        ("a", "F32", [2, 3], struct.pack("<6f", *[0.5 * i - 1 for i in range(6)])),
        ("b", "BF16", [4], b"".join(struct.pack("<f", v)[2:] for v in (1, 2, 3, -0.5))),
        ("c", "F16", [2, 2], struct.pack("<4e", 0.25, -2, 65504, 1e-4)),
        ("d", "I32", [3], struct.pack("<3i", -1, 0, 7)),
        ("e", "I64", [2], struct.pack("<2q", 1 << 40, -3)),
    ], {"format": "pt"})


def make_seeds(rng, tool_file):
    """[(header, data, pad)]: valid files of every shape the format allows."""
    seeds = [every_dtype() + (True,)]
    seeds.append(layout([("scalar", "F32", [], b"\0\0\x80?"), ("empty", "I64", [0, 3], b""),
                         ("also empty", "BF16", [4, 0], b""),
                         ("v", "I32", [1, 1, 1, 2], b"\1\0\0\0\2\0\0\0")]) + (False,))
    seeds.append((Obj(), b"", True))
    many = []
    for index in range(40):
        dtype = rng.choice(sorted(DTYPE_SIZES))
        shape = [rng.randint(0, 4) for _ in range(rng.randint(0, 3))]
        count = 1
        for dim in shape:
            count *= dim
        payload = bytes(rng.randrange(256) for _ in range(count * DTYPE_SIZES[dtype]))
        many.append(("layer.%d.weight" % index, dtype, shape, payload))
    order = list(range(len(many)))
    rng.shuffle(order)
    seeds.append(layout(many, {"format": "pt", "note": "tensors listed out of data order"}, order) + (False,))
    header, data = layout([(Raw(b'"\\u00e9t\\u00e9"'), "F16", [1], b"\0<"),
                           (Raw(b'"\\ud83d\\ude00 \\"q\\" \\n\\t\\/"'), "F32", [1], b"\0\0\0\0"),
                           ("\u00fcnicode raw", "I32", [2], b"\0" * 8)], {"k\u00e9y": "line\nbreak", "": ""})
    seeds.append((header, data, True))
    with open(tool_file, "rb") as f:
        blob = f.read()
    size = struct.unpack("<Q", blob[:8])[0]
    seeds.append((blob[8:8 + size], blob[8 + size:], False))
    return seeds


# ----------------------------------------------------------------------------
# Mutations


def tensor_indices(header):
    return [i for i, (key, _) in enumerate(header) if key != "__metadata__"]


def copy_header(header):
    """A deep copy that keeps Obj and Raw types."""
    if isinstance(header, Obj):
        return Obj((key, copy_header(value)) for key, value in header)
    if isinstance(header, list):
        return [copy_header(value) for value in header]
    return header


BAD_NUMBERS = [b"-1", b"-0", b"2.5", b"1e3", b"1E0", b"99999999999999999999", b"18446744073709551616",
               b"18446744073709551615", b"9223372036854775808", b"9223372036854775807", b"4294967296",
               b"0", b"1" + b"0" * 400, b"\"3\"", b"null", b"true", b"[2]", b"{}", b"01", b"-", b"1.", b"NaN",
               b"Infinity"]


def mutate(rng, seed):
    """One mutated variant of `seed` (a (header, data, pad) triple) as bytes."""
    header, data, pad = seed
    text = header if isinstance(header, bytes) else dump_json(header)
    valid = pack(text, data, pad)
    structured = isinstance(header, Obj) and tensor_indices(header)
    kind = rng.randrange(16)

    if kind == 0:  # bit flips anywhere, or in the header only
        out = bytearray(valid)
        end = len(out) if rng.random() < 0.5 else 8 + len(text)
        for _ in range(rng.randint(1, 6)):
            out[rng.randrange(end)] ^= 1 << rng.randrange(8)
        return bytes(out)
    if kind == 1:  # truncation: in the length, in the header, at its end, in the data
        where = rng.choice([rng.randrange(8), 8 + rng.randrange(len(text) + 1), 8 + len(text),
                            len(valid) - 1, rng.randrange(len(valid) + 1)])
        return valid[:max(where, 0)]
    if kind == 2:  # header length field
        size = len(text) + (-(8 + len(text)) % 8 if pad else 0)
        length = rng.choice([0, 1, size - 1, size + 1, size - 8, size + 8, MAX_HEADER, MAX_HEADER + 1,
                             len(valid), 2**63, 2**64 - 1, rng.randrange(2**64), rng.randrange(2 * size + 2)])
        return pack(text, data, pad, length % 2**64)
    if kind == 3:  # odd whole files
        return rng.choice([b"", b"\0" * 7, b"\0" * 8, struct.pack("<Q", 2) + b"{}", struct.pack("<Q", 2) + b"[]",
                           struct.pack("<Q", 8) + b"{}      ", struct.pack("<Q", 4) + b"null",
                           bytes(rng.randrange(256) for _ in range(rng.randint(1, 300))), pack(text, b"", pad)])
    if kind == 4:  # JSON syntax: delete, insert or replace a character
        out = bytearray(text)
        at = rng.randrange(len(out) + 1)
        op = rng.randrange(3)
        char = rng.choice(b'{}[],:"\\ 0123456789-.eEuatfnlx\t\n\x00\x7f')
        if op == 0 and at < len(out):
            del out[at]
        elif op == 1:
            out.insert(at, char)
        elif at < len(out):
            out[at] = char
        return pack(bytes(out), data, pad)
    if kind == 5:  # text around the JSON: trailing garbage, padding, BOM
        extra = rng.choice([(b"", b"x"), (b"", b"{}"), (b"", b","), (b"", b"\0"), (b"", b"\t\r\n "),
                            (b"\xef\xbb\xbf", b""), (b" \n", b""), (b"", b"\0" * 8), (b"", b"   }")])
        return pack(extra[0] + text + extra[1], data, pad)
    if kind == 6:  # invalid UTF-8, inside a string or anywhere
        bad = rng.choice([b"\xff", b"\xc3", b"\xc0\xaf", b"\xe2\x82", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                          b"\xf8\x88\x80\x80\x80", b"\x80", b"\xc3\xa9"])
        quotes = [i + 1 for i, c in enumerate(text) if c == ord('"')]
        at = rng.choice(quotes) if quotes and rng.random() < 0.7 else rng.randrange(len(text) + 1)
        return pack(text[:at] + bad + text[at:], data, pad)
    if kind == 7:  # escapes
        escape = rng.choice([b"\\ud800", b"\\udc00", b"\\ud800\\u0041", b"\\ud83d\\ude00", b"\\u00", b"\\x41",
                             b"\\u0000", b"\\", b"\\'", b"\n", b"\\uDBFF\\uDFFF", b"\\uZZZZ"])
        quotes = [i + 1 for i, c in enumerate(text) if c == ord('"')]
        at = rng.choice(quotes) if quotes else 0
        return pack(text[:at] + escape + text[at:], data, pad)
    if kind == 8:  # deep nesting in place of a value or appended
        depth = rng.choice([15, 17, 100, 1000, 100000])
        opener, closer = rng.choice([(b"[", b"]"), (b'{"a":', b"}")])
        body = opener * depth + b"1" + closer * rng.choice([0, depth])
        if structured:
            mutated = copy_header(header)
            index = rng.choice(range(len(mutated)))
            mutated[index] = (mutated[index][0], Raw(body))
            return pack(mutated, data, pad)
        return pack(b'{"x":' + body + b"}", data, pad)
    if not structured:
        return bytes(valid[: rng.randrange(len(valid) + 1)])

    mutated = copy_header(header)
    tensors = tensor_indices(mutated)
    index = rng.choice(tensors)
    name, entry = mutated[index]
    fields = Obj(entry) if isinstance(entry, Obj) else None

    def set_field(key, value):
        fields[[k for k, _ in fields].index(key)] = (key, value)
        mutated[index] = (name, fields)

    def field(key):
        return dict(fields)[key]

    if kind == 9:  # dtype
        set_field("dtype", rng.choice(["F64", "f32", "", "BF16 ", "BOOL", "I8", "U8", "F8_E4M3", "F32\0",
                                       "F32", "F16", "I64", Raw(b"4"), None, ["F32"], Obj()]))
        return pack(mutated, data, pad)
    if kind == 10:  # shape entries
        shape = list(field("shape"))
        choice = rng.randrange(4)
        if choice == 0 and shape:
            shape[rng.randrange(len(shape))] = Raw(rng.choice(BAD_NUMBERS))
        elif choice == 1:
            shape = rng.choice([[2**32] * 3, [2**63 - 1, 2], [2**31, 2**31, 4], [0, 2**63 - 1, 2**63 - 1], [], [[2]]])
        elif choice == 2:
            shape.append(Raw(rng.choice(BAD_NUMBERS)))
        else:
            shape = rng.choice([Raw(b"null"), Raw(b"3"), Raw(b'"[3]"'), Obj()])
        set_field("shape", shape)
        return pack(mutated, data, pad)
    if kind == 11:  # offsets: overlap, gap, out of range, reversed, malformed
        begin, end = field("data_offsets")
        choice = rng.randrange(8)
        if choice == 0:  # overlap the previous region (or shift left into nothing)
            k = rng.randint(1, 8)
            set_field("data_offsets", [max(begin - k, 0), max(end - k, 0) if begin >= k else end - begin])
        elif choice == 1:  # a gap: shift this and every later region right
            k = rng.choice([1, 2, 8, 16])
            for j in tensors:
                other = dict(mutated[j][1])
                if other["data_offsets"][0] >= begin:
                    other_fields = Obj(mutated[j][1])
                    b, e = other["data_offsets"]
                    at = [key for key, _ in other_fields].index("data_offsets")
                    other_fields[at] = ("data_offsets", [b + k, e + k])
                    mutated[j] = (mutated[j][0], other_fields)
            data = data[:begin] + bytes(k) + data[begin:] if rng.random() < 0.5 else data
            return pack(mutated, data, pad)
        elif choice == 2:
            set_field("data_offsets", [begin, end + rng.choice([1, 8, 2**40, 2**64 - 1 - end])])
        elif choice == 3:
            set_field("data_offsets", [end, begin])
        elif choice == 4:
            set_field("data_offsets", rng.choice([[begin], [begin, end, end], [], Raw(b"null"), Obj()]))
        elif choice == 5:
            set_field("data_offsets", [Raw(rng.choice(BAD_NUMBERS)), end])
        elif choice == 6:
            set_field("data_offsets", [begin, Raw(rng.choice(BAD_NUMBERS))])
        else:  # another tensor's region
            other = dict(mutated[rng.choice(tensors)][1])["data_offsets"]
            set_field("data_offsets", list(other))
        if rng.random() < 0.3:
            data += bytes(rng.choice([1, 8]))
        return pack(mutated, data, pad)
    if kind == 12:  # keys of a tensor entry
        choice = rng.randrange(5)
        if choice == 0:
            del fields[rng.randrange(len(fields))]
        elif choice == 1:
            fields.append((rng.choice(["offsets", "dtype", "extra", "__metadata__", ""]), 0))
        elif choice == 2:
            fields.insert(rng.randrange(len(fields) + 1), fields[rng.randrange(len(fields))])
        elif choice == 3:
            rng.shuffle(fields)  # still valid
        else:
            mutated[index] = (name, rng.choice([Raw(b"null"), [], "F32", Raw(b"7")]))
            return pack(mutated, data, pad)
        mutated[index] = (name, fields)
        return pack(mutated, data, pad)
    if kind == 13:  # names: duplicates, a second __metadata__, renames
        choice = rng.randrange(4)
        if choice == 0:
            mutated.insert(rng.randrange(len(mutated) + 1), mutated[index])
        elif choice == 1:
            mutated.insert(rng.randrange(len(mutated) + 1), ("__metadata__", Obj([("a", "b")])))
        elif choice == 2:
            other = mutated[rng.choice(tensors)][0]
            mutated[index] = (other, entry)
        else:
            mutated[index] = (rng.choice(["", "__metadata__", "x\u0000y", "\U0001f600"]), entry)
        return pack(mutated, data, pad)
    if kind == 14:  # metadata
        value = rng.choice([Obj([("a", Raw(b"1"))]), Obj([("a", Obj())]), Raw(b"null"), Raw(b"3"), [],
                            Obj([("a", "b"), ("a", "c")]), Obj(), Obj([("a", Raw(b"null"))]), "pt"])
        if mutated and mutated[0][0] == "__metadata__":
            mutated[0] = ("__metadata__", value)
        else:
            mutated.insert(rng.randrange(len(mutated) + 1), ("__metadata__", value))
        return pack(mutated, data, pad)
    # Reordered entries and a header without padding: still valid.
    rng.shuffle(mutated)
    return pack(mutated, data, rng.random() < 0.5)


# ----------------------------------------------------------------------------
# Fixed expectations


def fixed_cases(seeds):
    """[(label, bytes, expectation)]: VALID, or a word the message must hold."""
    header, data = every_dtype()
    cases = [("seed%d" % i, pack(h, d, p), VALID) for i, (h, d, p) in enumerate(seeds)]

    def edit(index, key, value, new_data=None):
        mutated = copy_header(header)
        fields = Obj(mutated[index][1])
        fields[[k for k, _ in fields].index(key)] = (key, value)
        mutated[index] = (mutated[index][0], fields)
        return pack(mutated, data if new_data is None else new_data)

    valid = pack(header, data)
    size = struct.unpack("<Q", valid[:8])[0]
    cases += [
        ("truncated-empty", b"", "truncat"),
        ("truncated-7-bytes", valid[:7], "truncat"),
        ("truncated-in-header", valid[:8 + size // 2], "truncat"),
        ("truncated-in-data", valid[:-1], "truncat"),
        ("bad-dtype", edit(1, "dtype", "F64"), "dtype"),
        ("overlap", edit(2, "data_offsets", [20, 28]), "overlap"),
        ("gap-trailing", valid + bytes(8), "cover"),
        ("huge-header-length", struct.pack("<Q", 2**64 - 1) + valid[8:], "limit"),
        ("duplicate-name", pack(Obj(list(header) + [header[1]]), data), "duplicate"),
        ("invalid-utf8", pack(Raw(b'{"\xff":1}'), b""), "UTF-8"),
        ("deep-nesting", pack(Raw(b'{"a":' + b"[" * 100000 + b"}"), b""), "nested"),
        ("float-shape", edit(1, "shape", [Raw(b"2.0"), 3]), "integer"),
        ("negative-shape", edit(1, "shape", [-2, -3]), "non-negative"),
        ("shape-overflow", edit(1, "shape", [2**32, 2**32]), "2^64"),
        ("size-mismatch", edit(1, "shape", [2, 2]), "needs 16 bytes"),
    ]
    # A gap between two regions: b starts 8 bytes late, the 8 bytes are zeros.
    gapped = copy_header(header)
    for j in range(2, len(gapped)):
        fields = Obj(gapped[j][1])
        b, e = dict(fields)["data_offsets"]
        fields[2] = ("data_offsets", [b + 8, e + 8])
        gapped[j] = (gapped[j][0], fields)
    cases.append(("gap-inner", pack(gapped, data[:24] + bytes(8) + data[24:]), "cover"))
    return cases


# ----------------------------------------------------------------------------
# Running


def run_tool(tool, path, timeout):
    """(problem or None, returncode, stdout, stderr, seconds)."""
    start = time.monotonic()
    try:
        proc = subprocess.run([tool, "check", path], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired:
        return "timeout after %d s" % timeout, None, b"", b"", timeout
    except OSError as error:
        return "could not run the tool: %s" % error, None, b"", b"", 0.0
    seconds = time.monotonic() - start
    problem = None
    if proc.returncode < 0:
        problem = "killed by signal %d" % -proc.returncode
    elif proc.returncode not in (0, 1):
        problem = "exit code %d" % proc.returncode
    elif proc.returncode == 1 and (not proc.stderr.startswith(b"loomrt-safetensors: error: ")
                                   or proc.stderr.count(b"\n") != 1 or not proc.stderr.endswith(b"\n")):
        problem = "exit code 1 without a one-line error message: %r" % proc.stderr[:200]
    elif proc.returncode == 0 and not proc.stdout.startswith(b"ok: "):
        problem = "exit code 0 without 'ok: N tensors'"
    return problem, proc.returncode, proc.stdout, proc.stderr, seconds


def check_case(tool, path, data, timeout, expect):
    """The problem with the tool's answer on `data` at `path`, or None.
    `expect` is None (whatever the reference says), VALID, or a word the
    error message must contain."""
    problem, code, out, err, seconds = run_tool(tool, path, timeout)
    if problem:
        return problem, seconds
    ok, count = reference(data)
    if expect is not None and ok != (expect is VALID):
        return "the reference checker disagrees with the fixed expectation", seconds
    if ok and code != 0:
        return "rejected a valid file: %s" % err.decode(errors="replace").strip(), seconds
    if not ok and code == 0:
        return "accepted a file the reference rejects", seconds
    if ok and out != b"ok: %d tensors\n" % count:
        return "expected 'ok: %d tensors', got %r" % (count, out), seconds
    if expect not in (None, VALID) and expect.encode() not in err:
        return "message does not mention %r: %s" % (expect, err.decode(errors="replace").strip()), seconds
    return None, seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tool", required=True, help="the loomrt-safetensors binary")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--count", type=int, default=2000)
    parser.add_argument("--timeout", type=int, default=10)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--crash-dir", default=None)
    args = parser.parse_args()
    if os.environ.get("LOOM_LONG") == "1":
        args.count *= 10

    rng = random.Random(args.seed)
    work = tempfile.mkdtemp(prefix="loom-fuzz-safetensors-")
    tool_file = os.path.join(work, "tool-write.safetensors")
    written = subprocess.run([args.tool, "write", tool_file], stderr=subprocess.PIPE)
    if written.returncode != 0:
        print("fuzz-safetensors: '%s write' failed: %s" % (args.tool, written.stderr.decode(errors="replace")))
        return 1
    seeds = make_seeds(rng, tool_file)
    with open(tool_file, "rb") as f:
        # buildSafetensorsHeader writes compact JSON like the safetensors
        # package, so the tool's file must equal the one built here.
        if f.read() != pack(*every_dtype()):
            print("fuzz-safetensors: '%s write' differs from the file every_dtype() describes" % args.tool)
            return 1

    # Fixed cases first (seeds must pass, broken files must be named), then
    # the mutants, judged by the reference checker alone.
    cases = fixed_cases(seeds)
    for index in range(args.count):
        cases.append(("case%05d" % index, mutate(rng, seeds[index % len(seeds)]), None))
    jobs = []
    for label, data, expect in cases:
        path = os.path.join(work, label + ".safetensors")
        with open(path, "wb") as f:
            f.write(data)
        jobs.append((path, data, expect, label))

    failures = []
    slowest = (0.0, "")
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        results = pool.map(lambda job: (job, check_case(args.tool, job[0], job[1], args.timeout, job[2])), jobs)
        for (path, data, expect, label), (problem, seconds) in results:
            if problem:
                failures.append((path, problem))
            slowest = max(slowest, (seconds, label))

    for path, problem in failures:
        print("FAIL %s: %s" % (path, problem))
        if args.crash_dir:
            os.makedirs(args.crash_dir, exist_ok=True)
            shutil.copy(path, args.crash_dir)
    print("fuzz-safetensors: %d inputs, %d failures" % (len(jobs), len(failures)))
    print("fuzz-safetensors: slowest input %s took %.2f s" % (slowest[1], slowest[0]))
    if not failures:
        shutil.rmtree(work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
