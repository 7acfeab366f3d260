#!/usr/bin/env python3
"""Hostile external-data references: refused, and nothing outside the model
directory is ever opened.

    test_attacks.py --build BUILD [--work DIR] [--keep]

Each case is a model directory `R/model/` whose tensor `evil_weight`
(float [16, 16], 1024 bytes) has a malicious TensorProto.external_data (or
dims, or inline raw_data), built with the onnx Python API. Beside it,
`R/secret/x` is a 4096-byte file that would satisfy the tensor if graft were
fooled into reading it.

For every case, both `onnx_roundtrip R/model/model.onnx R/out/model.onnx` and
`graft inspect R/model/model.onnx` run under
`strace -f -y -e trace=open,openat,openat2,creat`, and must:
  - exit with status 2, no crash, no sanitizer report;
  - print on stderr a message naming the tensor and (for external data) the
    location;
  - never successfully open a path outside R/model (R/out for the round
    trip), except the dynamic loader's and libc's system files; the secret
    directory must never appear in a successful open.

`strace -y` prints every returned file descriptor with the path the kernel
resolved for it, so symlinks and dirfd-relative `openat2` calls are judged by
where they really landed. Two controls keep the harness honest: the
unmodified model must load (exit 0) under the same tracing rules, and the
log parser must flag `cat R/secret/x`.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402

TENSOR = "evil_weight"
NBYTES = 1024
SYSTEM_PREFIXES = (
    "/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/", "/usr/libexec/",
    "/usr/share/locale/", "/usr/share/zoneinfo/", "/proc/", "/sys/", "/dev/",
)
SYSTEM_FILES = {"/etc/ld.so.cache", "/etc/locale.alias", "/etc/localtime",
                "/etc/ld.so.preload", "/dev/null"}
OPEN_CALLS = ("open", "openat", "openat2", "creat")


# ---------------------------------------------------------------- models

def base_model():
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w = numpy_helper.from_array(
        np.arange(256, dtype=np.float32).reshape(16, 16) / 7.0, TENSOR)
    g = helper.make_graph(
        [helper.make_node("Identity", [TENSOR], ["y"])], "attack",
        [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 16])],
        initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
    m.ir_version = 10
    onnx.checker.check_model(m)
    return m


def set_external(t, entries):
    from onnx import TensorProto

    t.ClearField("raw_data")
    del t.external_data[:]
    for k, v in entries:
        e = t.external_data.add()
        e.key, e.value = k, v
    t.data_location = TensorProto.EXTERNAL


def ext(location, offset="0", length=str(NBYTES)):
    entries = [("location", location)]
    if offset is not None:
        entries.append(("offset", offset))
    if length is not None:
        entries.append(("length", length))
    return entries


class Case:
    def __init__(self, name, location, entries=None, prepare=None, dims=None, raw=None,
                 expect_location=True):
        self.name = name
        self.location = location      # what the message must name ("" / None: nothing)
        self.entries = entries        # external_data entries, None: inline
        self.prepare = prepare        # fn(root) run after the model dir exists
        self.dims = dims              # override dims
        self.raw = raw                # inline raw_data override
        self.expect_location = expect_location and bool(location)


def cases(secret_abs_placeholder="@SECRET@"):
    I64MAX = str(2**63 - 1)
    U64MAX = str(2**64 - 1)
    W = "weights.bin"

    def mkdir_a(root):
        os.makedirs(os.path.join(root, "model", "a"))

    def symlink_file(root):
        os.symlink("../secret/x", os.path.join(root, "model", "link.bin"))

    def symlink_file_abs(root):
        os.symlink(os.path.join(root, "secret", "x"), os.path.join(root, "model", "link.bin"))

    def symlink_dir(root):
        os.symlink("../secret", os.path.join(root, "model", "sub"))

    def hardlink(root):  # the secret's inode, reached by a name inside the dir
        os.link(os.path.join(root, "secret", "x"), os.path.join(root, "model", "hard.bin"))

    def inner_hardlink(root):
        os.link(os.path.join(root, "model", W), os.path.join(root, "model", "copy.bin"))

    def fifo(root):
        os.mkfifo(os.path.join(root, "model", "fifo.bin"))

    def subdir(root):
        os.makedirs(os.path.join(root, "model", "dir.bin"))

    return [
        Case("dotdot", "../secret/x", ext("../secret/x")),
        Case("a_dotdot", "a/../../secret/x", ext("a/../../secret/x"), prepare=mkdir_a),
        Case("absolute", secret_abs_placeholder, ext(secret_abs_placeholder)),
        Case("empty_location", "", ext("")),
        Case("no_location_key", "", [("offset", "0"), ("length", str(NBYTES))]),
        Case("symlink_file", "link.bin", ext("link.bin"), prepare=symlink_file),
        Case("symlink_file_abs", "link.bin", ext("link.bin"), prepare=symlink_file_abs),
        Case("symlink_parent_dir", "sub/x", ext("sub/x"), prepare=symlink_dir),
        Case("hardlink_to_secret", "hard.bin", ext("hard.bin"), prepare=hardlink),
        Case("hardlink_nlink2", "copy.bin", ext("copy.bin"), prepare=inner_hardlink),
        Case("fifo", "fifo.bin", ext("fifo.bin"), prepare=fifo),
        Case("directory", "dir.bin", ext("dir.bin"), prepare=subdir),
        Case("missing_file", "nothere.bin", ext("nothere.bin")),
        Case("nul_in_location", "weights.bin", ext("weights.bin\0../../secret/x"),
             expect_location=False),
        Case("offset_past_end", W, ext(W, offset="512")),
        Case("offset_beyond_file", W, ext(W, offset="8192")),
        Case("negative_offset", W, ext(W, offset="-1")),
        Case("negative_length", W, ext(W, length="-1024")),
        Case("offset_u64max", W, ext(W, offset=U64MAX)),
        Case("offset_i64max", W, ext(W, offset=I64MAX)),
        Case("offset_plus_length_overflows", W, ext(W, offset=str(2**63 - 512))),
        Case("offset_2pow64", W, ext(W, offset=str(2**64))),
        Case("length_u64max", W, ext(W, length=U64MAX)),
        Case("length_i64max", W, ext(W, length=I64MAX)),
        Case("offset_non_numeric", W, ext(W, offset="12abc")),
        Case("offset_alpha", W, ext(W, offset="abc")),
        Case("offset_hex", W, ext(W, offset="0x10")),
        Case("offset_empty", W, ext(W, offset="")),
        Case("length_non_numeric", W, ext(W, length="1k")),
        Case("length_short", W, ext(W, length=str(NBYTES - 4))),
        Case("length_long", W, ext(W, length=str(NBYTES * 2))),
        Case("dims_product_overflows", W, ext(W, length=None), dims=[2**32, 2**32],
             expect_location=False),
        Case("dims_bytes_overflow", W, ext(W, length=None), dims=[2**62],
             expect_location=False),
        Case("dims_product_overflows_with_length", W, ext(W), dims=[2**40, 2**40, 16],
             expect_location=False),
        Case("negative_dim", W, ext(W), dims=[-16, -16],
             expect_location=False),
        Case("negative_dim_inline", None, None, dims=[-16, -16]),
        Case("dims_overflow_inline", None, None, dims=[2**32, 2**32]),
        Case("raw_data_short", None, None, raw=b"\0" * (NBYTES - 4)),
        Case("raw_data_long", None, None, raw=b"\0" * (NBYTES + 4)),
    ]


def build_case(root: str, case: Case) -> str:
    import onnx

    model_dir = os.path.join(root, "model")
    os.makedirs(model_dir)
    os.makedirs(os.path.join(root, "secret"))
    os.makedirs(os.path.join(root, "out"))
    m = base_model()
    t = m.graph.initializer[0]
    raw = t.raw_data
    with open(os.path.join(model_dir, "weights.bin"), "wb") as f:
        f.write(raw)
    with open(os.path.join(root, "secret", "x"), "wb") as f:
        f.write(b"SECRET!!" * 512)  # 4096 bytes: enough to satisfy the tensor
    if case.prepare:
        case.prepare(root)
    if case.entries is not None:
        secret_abs = os.path.join(root, "secret", "x")
        set_external(t, [(k, v.replace("@SECRET@", secret_abs)) for k, v in case.entries])
    if case.raw is not None:
        t.raw_data = case.raw
    if case.dims is not None:
        del t.dims[:]
        t.dims.extend(case.dims)
    path = os.path.join(model_dir, "model.onnx")
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return path


# ---------------------------------------------------------------- strace

LINE_RE = re.compile(r"^(\d+)\s+(.*)$")
CALL_RE = re.compile(r"^(\w+)\((.*)$")
RET_RE = re.compile(r"\)\s+=\s+(-?\d+)(?:<(.*?)>)?(?:\s.*)?$")


def strace_events(log_path: str):
    """Yields (pid, call, args_text, retval, ret_path) for each completed
    open-family call in an `strace -f -y` log."""
    pending: dict[str, str] = {}
    with open(log_path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            m = LINE_RE.match(line)
            pid, rest = (m.group(1), m.group(2)) if m else ("?", line)
            if rest.startswith("+++") or rest.startswith("---"):
                continue
            if rest.endswith("<unfinished ...>"):
                pending[pid] = rest[: -len("<unfinished ...>")]
                continue
            rm = re.match(r"^<\.\.\. (\w+) resumed>(.*)$", rest)
            if rm:
                rest = pending.pop(pid, rm.group(1) + "(") + rm.group(2)
            cm = CALL_RE.match(rest)
            if not cm or cm.group(1) not in OPEN_CALLS:
                continue
            r = RET_RE.search(rest)
            if not r:
                yield pid, cm.group(1), cm.group(2), None, None  # judged as a violation
                continue
            yield pid, cm.group(1), cm.group(2), int(r.group(1)), r.group(2)


def violations(log_path: str, allowed_dirs, secret_dir: str) -> list[str]:
    allowed_dirs = [os.path.realpath(d) for d in allowed_dirs]
    secret_dir = os.path.realpath(secret_dir)
    bad = []
    for pid, call, args, ret, path in strace_events(log_path):
        if ret is None and not re.search(r"\)\s+=", args):
            continue  # cut off: the call never returned (process killed in it)
        if ret is None:
            bad.append(f"unparsable strace line: {call}({args}")
            continue
        if ret < 0:
            continue
        if path is None:
            bad.append(f"successful {call} with no path shown: {call}({args}")
            continue
        if path == secret_dir or path.startswith(secret_dir + "/"):
            bad.append(f"SECRET OPENED: {call}({args} -> {path}")
            continue
        if any(path == d or path.startswith(d + "/") for d in allowed_dirs):
            continue
        if path in SYSTEM_FILES or path.startswith(SYSTEM_PREFIXES):
            continue
        is_dir_open = "O_DIRECTORY" in args or "O_PATH" in args
        if is_dir_open and any(d.startswith(path.rstrip("/") + "/") for d in allowed_dirs):
            continue  # an ancestor directory of the model dir (path walk)
        bad.append(f"opened outside the model directory: {call}({args} -> {path}")
    return bad


def traced(argv, log_path, timeout=60):
    """LeakSanitizer cannot run under ptrace: leak checks are off in the
    traced run (the untraced run of each case keeps them)."""
    cmd = ["strace", "-f", "-y", "-qq", "-e", "trace=" + ",".join(OPEN_CALLS),
           "-o", log_path] + argv
    asan = common.sanitizer_env().get("ASAN_OPTIONS", "")
    return common.run(cmd, timeout=timeout,
                      extra_env={"ASAN_OPTIONS": (asan + ":" if asan else "") + "detect_leaks=0"})


# ---------------------------------------------------------------- main

def onnx_refuses(model_path: str) -> str:
    """Informational: what the onnx reference loader does with the case."""
    import warnings

    import onnx

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = onnx.load(model_path, load_external_data=True)
            onnx.numpy_helper.to_array(m.graph.initializer[0])
        return "accepts"
    except Exception:  # noqa: BLE001
        return "refuses"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build")
    ap.add_argument("--work")
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("--filter", default="")
    ap.add_argument("--verbose", action="store_true", help="print every case's exit codes")
    args = ap.parse_args()
    build = common.build_dir(args.build)
    rt, graft = common.roundtrip_bin(build), common.graft_bin(build)
    common.require_bins(rt, graft)
    if not shutil.which("strace"):
        print("test_attacks: strace not installed (tools/deps.sh installs it)", file=sys.stderr)
        return 1
    work = args.work or tempfile.mkdtemp(prefix="graft-attacks-")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    work = os.path.realpath(work)
    failures: list[tuple[str, list[str]]] = []

    # Control 1: the parser flags a successful open of the secret.
    root = os.path.join(work, "control_parser")
    build_case(root, Case("control", "weights.bin", ext("weights.bin")))
    log = os.path.join(root, "strace.log")
    r = traced(["cat", os.path.join(root, "secret", "x")], log)
    v = violations(log, [os.path.join(root, "model")], os.path.join(root, "secret"))
    if r.rc != 0 or not any("SECRET OPENED" in x for x in v):
        failures.append(("control_parser", [f"strace parser missed `cat secret/x` (rc={r.rc}): {v}"]))

    # Control 2: the well-formed model loads under the same rules.
    root = os.path.join(work, "control_valid")
    src = build_case(root, Case("control", "weights.bin", ext("weights.bin")))
    problems = []
    for tool, argv, allowed in (
        ("roundtrip", [rt, src, os.path.join(root, "out", "model.onnx"), "--threshold", "16"],
         ["model", "out"]),
        ("inspect", [graft, "inspect", src], ["model"]),
    ):
        log = os.path.join(root, f"strace.{tool}.log")
        r = traced(argv, log)
        if r.rc != 0 or r.crashed:
            problems.append(f"{tool}: valid model not loaded: {r.describe()}")
        problems += [f"{tool}: {x}" for x in violations(
            log, [os.path.join(root, d) for d in allowed], os.path.join(root, "secret"))]
        if not any(p and p.endswith("/model/weights.bin") and ret >= 0
                   for _, _, _, ret, p in strace_events(log)):
            problems.append(f"{tool}: strace shows no successful open of model/weights.bin")
    if problems:
        failures.append(("control_valid", problems))

    n = 0
    table = []
    for case in cases():
        if args.filter not in case.name:
            continue
        n += 1
        root = os.path.join(work, case.name)
        src = build_case(root, case)
        location = case.location
        if location == "@SECRET@":
            location = os.path.join(root, "secret", "x")
        problems = []
        row = [case.name]
        for tool, argv, allowed in (
            ("roundtrip", [rt, src, os.path.join(root, "out", "model.onnx")], ["model", "out"]),
            ("inspect", [graft, "inspect", src], ["model"]),
        ):
            log = os.path.join(root, f"strace.{tool}.log")
            r = traced(argv, log, timeout=10)
            row.append(str(r.rc) if not r.timed_out else "hang")
            if r.crashed:
                problems.append(f"{tool}: crashed: {r.describe()}")
            elif r.rc != 2:
                problems.append(f"{tool}: expected exit 2: {r.describe()}")
            else:
                if "model.onnx" not in r.stderr:
                    problems.append(f"{tool}: stderr does not name the model file: "
                                    f"{r.stderr.strip()!r}")
                if TENSOR not in r.stderr:
                    problems.append(f"{tool}: stderr does not name tensor {TENSOR!r}: "
                                    f"{r.stderr.strip()!r}")
                if case.expect_location and location not in r.stderr:
                    problems.append(f"{tool}: stderr does not name location {location!r}: "
                                    f"{r.stderr.strip()!r}")
            problems += [f"{tool}: {x}" for x in violations(
                log, [os.path.join(root, d) for d in allowed], os.path.join(root, "secret"))]
            # untraced, with leak checks (SANITIZE=1)
            r2 = common.run(argv, timeout=10)
            if r2.crashed or r2.rc != 2:
                problems.append(f"{tool}: untraced run: expected exit 2, clean: {r2.describe()}")
            if tool == "roundtrip" and os.listdir(os.path.join(root, "out")):
                problems.append(f"roundtrip: wrote {os.listdir(os.path.join(root, 'out'))} "
                                "for a refused model")
        row.append(onnx_refuses(src) if case.name != "fifo" else "-")
        table.append(row)
        if problems:
            failures.append((case.name, problems))

    failed = {name for name, _ in failures}
    print(f"{'case':36} {'roundtrip':>9} {'inspect':>8} {'onnx':>8}")
    for row in table:
        if args.verbose or row[0] in failed:
            print(f"{row[0]:36} {row[1]:>9} {row[2]:>8} {row[3]:>8}")
    for name, problems in failures:
        print(f"FAIL {name}")
        for p in problems:
            print(f"    {p}")
    if failures or args.keep:
        print(f"(scratch kept in {work})")
    else:
        shutil.rmtree(work, ignore_errors=True)
    print(f"test_attacks: {n} attack cases + 2 controls, "
          f"{n + 2 - len(failures)} passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
