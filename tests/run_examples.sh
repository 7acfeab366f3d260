#!/bin/sh
# Runs the example programs the way an embedding application would, on a
# model written by the onnx package (the oracle), and checks the results
# with onnx. BUILD and PY come from the Makefile.
set -eu
BUILD=${BUILD:-build}
PY=${PY:-.venv/bin/python}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
"$PY" - "$T" <<'PYEOF'
import sys, numpy as np, onnx
from onnx import helper, numpy_helper, TensorProto
d = sys.argv[1]
w = numpy_helper.from_array(np.arange(1024, dtype=np.float32).reshape(32, 32), "w")
w2 = numpy_helper.from_array(np.arange(1024, dtype=np.float32).reshape(32, 32) * -1, "w2")
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["t"]),
                       helper.make_node("MatMul", ["t", "w2"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 32])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 32])], [w, w2])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)])
onnx.save(m, d + "/in.onnx", save_as_external_data=True, location="in.bin", size_threshold=0)
PYEOF
echo "== examples/onnx_roundtrip"
"$BUILD/examples/onnx_roundtrip" "$T/in.onnx" "$T/out.onnx"
"$PY" - "$T" <<'PYEOF'
import sys, os, onnx
d = sys.argv[1]
a = onnx.load(d + "/in.onnx", load_external_data=True)
b = onnx.load(d + "/out.onnx", load_external_data=False)
ext = {e.key: e.value for e in b.graph.initializer[0].external_data}
assert ext["location"] == "out.onnx.data" and int(ext["offset"]) % 4096 == 0, ext
onnx.load_external_data_for_model(b, d)
assert a.graph.initializer[0].raw_data == b.graph.initializer[0].raw_data
onnx.checker.check_model(d + "/out.onnx", full_check=True)
print("onnx_roundtrip: external tensor bytes identical, checker passes")
PYEOF
echo "== examples/onnx_roundtrip --shard-size 4096"
"$BUILD/examples/onnx_roundtrip" "$T/in.onnx" "$T/sh.onnx" --shard-size 4096
"$PY" - "$T" <<'PYEOF'
import sys, onnx
d = sys.argv[1]
a = onnx.load(d + "/in.onnx", load_external_data=True)
b = onnx.load(d + "/sh.onnx", load_external_data=False)
locs = sorted({e.value for t in b.graph.initializer for e in t.external_data if e.key == "location"})
assert locs == ["sh.onnx.data.00001", "sh.onnx.data.00002"], locs
onnx.load_external_data_for_model(b, d)
assert [t.raw_data for t in a.graph.initializer] == [t.raw_data for t in b.graph.initializer]
print("onnx_roundtrip: 2 shards, tensor bytes identical")
PYEOF
echo "== examples/generate_ids"
GOLDEN=tests/fixtures/llama-builder-fp32/golden.ort.json
IDS=$("$PY" -c "import json; e=json.load(open('$GOLDEN'))['prompts'][0]; print(' '.join(map(str, e['prompt_ids'])))")
WANT=$("$PY" -c "import json; e=json.load(open('$GOLDEN'))['prompts'][0]; print(' '.join(map(str, e['generated_ids'])))")
# shellcheck disable=SC2086
GOT=$("$BUILD/examples/generate_ids" tests/fixtures/llama-builder-fp32 "$T/llama" 16 $IDS)
if [ "$GOT" != "$WANT" ]; then
    echo "generate_ids: got [$GOT], the ONNX Runtime golden says [$WANT]" >&2
    exit 1
fi
echo "generate_ids: 16 greedy ids equal the ONNX Runtime golden"
