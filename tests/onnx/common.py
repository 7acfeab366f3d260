"""Shared helpers for graft's ONNX oracle tests (tests/onnx/*.py).

Every test runs graft's binaries from a build directory (BUILD: `build` or
`build/san`) and judges them against onnx / onnxruntime / numpy.
"""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Text a sanitizer (ASan, UBSan, LSan) prints when it fires.
SANITIZER_RE = re.compile(
    r"AddressSanitizer|LeakSanitizer|UndefinedBehaviorSanitizer|"
    r"runtime error:|ERROR: .*Sanitizer|SUMMARY: .*Sanitizer"
)


def build_dir(arg: str | None) -> str:
    b = arg or os.environ.get("BUILD") or "build"
    return b if os.path.isabs(b) else os.path.join(REPO, b)


def roundtrip_bin(build: str) -> str:
    return os.path.join(build, "examples", "onnx_roundtrip")


def graft_bin(build: str) -> str:
    return os.path.join(build, "graft")


def require_bins(*paths: str) -> None:
    missing = [p for p in paths if not os.access(p, os.X_OK)]
    if missing:
        sys.exit(f"missing binaries (run make first): {', '.join(missing)}")


def sanitizer_env() -> dict:
    """Environment for the binaries: sanitizer reports abort the process."""
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1:allocator_may_return_null=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    return env


class Result:
    def __init__(self, argv, rc, out, err, timed_out=False):
        self.argv = argv
        self.rc = rc
        self.stdout = out
        self.stderr = err
        self.timed_out = timed_out

    @property
    def crashed(self) -> bool:
        """A signal, an exit status a clean error path never uses, a
        sanitizer report, or a hang."""
        return (
            self.timed_out
            or self.rc < 0
            or self.rc >= 128
            or bool(SANITIZER_RE.search(self.stderr))
        )

    def describe(self) -> str:
        what = "timed out" if self.timed_out else f"rc={self.rc}"
        err = self.stderr.strip()
        if len(err) > 1500:
            err = err[:700] + "\n...\n" + err[-700:]
        return f"{' '.join(self.argv)}: {what}\n    stderr: {err}"


def run(argv, timeout=60, cwd=None, extra_env=None) -> Result:
    """Runs argv in its own process group; on timeout the whole group is
    killed (a process hung under strace would otherwise outlive strace)."""
    env = sanitizer_env()
    env.update(extra_env or {})
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=cwd, start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
        return Result(argv, p.returncode, out.decode(errors="replace"),
                      err.decode(errors="replace"))
    except subprocess.TimeoutExpired:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = p.communicate()
        return Result(argv, -999, out.decode(errors="replace"),
                      err.decode(errors="replace"), timed_out=True)


def tensors_of_graph(graph, where="graph"):
    """(where, TensorProto) for every tensor in a graph and its subgraphs:
    initializers, sparse initializers, tensor attributes."""
    for t in graph.initializer:
        yield f"{where}/initializer", t
    for s in graph.sparse_initializer:
        yield f"{where}/sparse_initializer", s.values
        yield f"{where}/sparse_initializer", s.indices
    for n in graph.node:
        yield from tensors_of_attrs(n.attribute, f"{where}/node:{n.name or n.op_type}")


def tensors_of_attrs(attrs, where):
    for a in attrs:
        if a.HasField("t"):
            yield f"{where}/attr:{a.name}", a.t
        for t in a.tensors:
            yield f"{where}/attr:{a.name}", t
        if a.HasField("g"):
            yield from tensors_of_graph(a.g, f"{where}/attr:{a.name}")
        for g in a.graphs:
            yield from tensors_of_graph(g, f"{where}/attr:{a.name}")


def tensors_of_model(model):
    yield from tensors_of_graph(model.graph)
    for f in model.functions:
        for n in f.node:
            yield from tensors_of_attrs(n.attribute, f"function:{f.name}/node:{n.op_type}")


def external_info(t) -> dict:
    return {e.key: e.value for e in t.external_data}


def is_external(t) -> bool:
    from onnx import TensorProto

    return t.data_location == TensorProto.EXTERNAL


def normalize_loaded(model):
    """onnx.load(..., load_external_data=True) sets data_location = DEFAULT
    explicitly on every tensor it read from a file, and protobuf equality
    counts field presence. Clear that explicit default, in place, on every
    tensor so a tensor read from external data compares equal to the same
    tensor stored inline. Returns the model."""
    from onnx import TensorProto

    for _, t in tensors_of_model(model):
        if t.HasField("data_location") and t.data_location == TensorProto.DEFAULT:
            t.ClearField("data_location")
    return model
