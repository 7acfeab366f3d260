#!/usr/bin/env python3
"""Hand-built hostile ONNX files that the protobuf Python API cannot make.

    tools/attack_models.py OUTDIR [--depth 10000]

Writes deeply nested models as raw protobuf wire bytes, built iteratively
from the inside out (python protobuf refuses to build or parse messages
nested this deep; protobuf-c's recursive unpack overflows an 8 MiB stack):

  nested_graph.onnx     graph > node > attribute (GRAPH) > graph > ... DEPTH levels
  nested_function.onnx  the same chain inside a FunctionProto's node
  nested_seq_type.onnx  graph input of type sequence(sequence(...(tensor)))
  nested_opt_type.onnx  graph input of type optional(sequence(optional(...)))

Field numbers are those of onnx.proto (ModelProto.graph = 7, GraphProto.node
= 1, NodeProto.attribute = 5, AttributeProto.g = 6, AttributeProto.type = 20,
TypeProto.sequence_type = 4, TypeProto.optional_type = 9, ...); tests check
the encoder by parsing shallow instances with onnx.
"""
from __future__ import annotations

import argparse
import os
import sys

# wire types
VARINT, LEN = 0, 2

# onnx.proto field numbers used below
MODEL_IR_VERSION, MODEL_PRODUCER, MODEL_GRAPH, MODEL_OPSET, MODEL_FUNCTIONS = 1, 2, 7, 8, 25
OPSET_DOMAIN, OPSET_VERSION = 1, 2
GRAPH_NODE, GRAPH_NAME, GRAPH_INPUT, GRAPH_OUTPUT = 1, 2, 11, 12
NODE_INPUT, NODE_OUTPUT, NODE_OP_TYPE, NODE_ATTRIBUTE, NODE_DOMAIN = 1, 2, 4, 5, 7
ATTR_NAME, ATTR_G, ATTR_TYPE, ATTR_TYPE_GRAPH = 1, 6, 20, 5
VI_NAME, VI_TYPE = 1, 2
TYPE_TENSOR, TYPE_SEQUENCE, TYPE_OPTIONAL = 1, 4, 9
TENSOR_ELEM_TYPE = 1
SEQ_ELEM, OPT_ELEM = 1, 1
FUNC_NAME, FUNC_INPUT, FUNC_OUTPUT, FUNC_NODE, FUNC_OPSET, FUNC_DOMAIN = 1, 4, 5, 7, 9, 10


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def tag(field: int, wire: int) -> bytes:
    return varint(field << 3 | wire)


def f_varint(field: int, v: int) -> bytes:
    return tag(field, VARINT) + varint(v)


def f_bytes(field: int, b: bytes) -> bytes:
    return tag(field, LEN) + varint(len(b)) + b


def f_str(field: int, s: str) -> bytes:
    return f_bytes(field, s.encode())


class Nest:
    """Builds PREFIX_n ... PREFIX_1 CORE where each level wraps everything
    inside it as the last field of a length-delimited message. Prefixes are
    collected with their lengths known from the inside out, so the total is
    built in linear time."""

    def __init__(self, core: bytes):
        self.parts = [core]
        self.size = len(core)

    def wrap(self, head: bytes, field: int) -> None:
        """Current content becomes field `field` of a message that starts
        with `head`."""
        p = head + tag(field, LEN) + varint(self.size)
        self.parts.append(p)
        self.size += len(p)

    def bytes(self) -> bytes:
        return b"".join(reversed(self.parts))


def opset(domain: str, version: int) -> bytes:
    return f_str(OPSET_DOMAIN, domain) + f_varint(OPSET_VERSION, version)


def nested_graph_body(depth: int) -> Nest:
    """GraphProto bytes: graph > node(If-like) > attribute g > graph ... ."""
    n = Nest(f_str(GRAPH_NAME, "leaf"))
    for i in range(depth):
        # attribute: name, type=GRAPH, then g (the inner graph) last
        n.wrap(f_str(ATTR_NAME, "body") + f_varint(ATTR_TYPE, ATTR_TYPE_GRAPH), ATTR_G)
        # node: op_type, then attribute last
        n.wrap(f_str(NODE_OP_TYPE, "Loop") + f_str(NODE_OUTPUT, f"o{i}"), NODE_ATTRIBUTE)
        # graph: name, then the node last
        n.wrap(f_str(GRAPH_NAME, f"g{i}"), GRAPH_NODE)
    return n


def model_head() -> bytes:
    return (f_varint(MODEL_IR_VERSION, 10) + f_str(MODEL_PRODUCER, "graft-attack")
            + f_bytes(MODEL_OPSET, opset("", 21)))


def nested_graph_model(depth: int) -> bytes:
    n = nested_graph_body(depth)
    n.wrap(model_head(), MODEL_GRAPH)
    return n.bytes()


def nested_function_model(depth: int) -> bytes:
    """A FunctionProto whose node carries the nested graph attribute."""
    g = nested_graph_body(depth)
    g.wrap(f_str(ATTR_NAME, "body") + f_varint(ATTR_TYPE, ATTR_TYPE_GRAPH), ATTR_G)
    g.wrap(f_str(NODE_OP_TYPE, "Loop") + f_str(NODE_OUTPUT, "y"), NODE_ATTRIBUTE)
    g.wrap(f_str(FUNC_NAME, "deep") + f_str(FUNC_DOMAIN, "graft.test")
           + f_str(FUNC_OUTPUT, "y") + f_bytes(FUNC_OPSET, opset("", 21)), FUNC_NODE)
    main_graph = f_str(GRAPH_NAME, "main")
    g.wrap(model_head() + f_bytes(MODEL_OPSET, opset("graft.test", 1))
           + f_bytes(MODEL_GRAPH, main_graph), MODEL_FUNCTIONS)
    return g.bytes()


def nested_type_model(depth: int, kinds: tuple[int, ...]) -> bytes:
    """Graph input whose TypeProto nests `depth` levels, cycling through
    `kinds` (TYPE_SEQUENCE / TYPE_OPTIONAL) around a float tensor."""
    n = Nest(f_bytes(TYPE_TENSOR, f_varint(TENSOR_ELEM_TYPE, 1)))  # TypeProto{tensor}
    for i in range(depth):
        kind = kinds[i % len(kinds)]
        n.wrap(b"", SEQ_ELEM)       # Sequence/Optional{elem_type: TypeProto}
        n.wrap(b"", kind)           # TypeProto{sequence_type|optional_type}
    n.wrap(f_str(VI_NAME, "x"), VI_TYPE)  # ValueInfoProto{name, type}
    n.wrap(f_str(GRAPH_NAME, "main"), GRAPH_INPUT)
    n.wrap(model_head(), MODEL_GRAPH)
    return n.bytes()


BUILDERS = {
    "nested_graph": nested_graph_model,
    "nested_function": nested_function_model,
    "nested_seq_type": lambda d: nested_type_model(d, (TYPE_SEQUENCE,)),
    "nested_opt_type": lambda d: nested_type_model(d, (TYPE_OPTIONAL, TYPE_SEQUENCE)),
}


def write_all(out_dir: str, depth: int) -> dict[str, str]:
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name, build in BUILDERS.items():
        p = os.path.join(out_dir, f"{name}.onnx")
        with open(p, "wb") as f:
            f.write(build(depth))
        paths[name] = p
    return paths


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("outdir")
    ap.add_argument("--depth", type=int, default=10000)
    args = ap.parse_args()
    for name, p in write_all(args.outdir, args.depth).items():
        print(f"{p}: {os.path.getsize(p)} bytes, depth {args.depth}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
