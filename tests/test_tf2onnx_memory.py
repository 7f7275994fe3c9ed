"""tf2onnx's graph optimizers without a copy of the weights per pass (graph/convert.py)."""

from __future__ import annotations

import json
import subprocess
import sys

from conftest import REPO

# A tf2onnx graph holding a 40 MB constant, brought up to date 10 times as every optimizer pass
# does, in a fresh process (a long-lived test worker reuses freed heap, which hides the growth);
# prints the resident growth in MB and a digest of the nodes' protobufs.
CHILD = r"""
import contextlib, hashlib, json, sys
import numpy as np
import tf2onnx
from tf2onnx.graph import Graph
from optimizer.graph.convert import _fresh_node_protos
from optimizer.workers import proc_kb_bytes

g = Graph([], opset=13)
const = g.make_const("w", np.ones(10_000_000, np.float32))
relu = g.make_node("Relu", [const.output[0]], name="r")
g.add_graph_output(relu.output[0])
before = proc_kb_bytes("/proc/self/status", "VmRSS")
with _fresh_node_protos(tf2onnx) if sys.argv[1] == "patched" else contextlib.nullcontext():
    for _ in range(10):
        g.update_proto()
grown = (proc_kb_bytes("/proc/self/status", "VmRSS") - before) / 1e6
digest = hashlib.sha256(b"".join(n.op.SerializeToString() for n in g.get_nodes())).hexdigest()
print(json.dumps({"grown_mb": grown, "digest": digest}))
"""


def _child(variant: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, variant], capture_output=True, text=True, cwd=REPO,
                         env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": "/usr/bin:/bin"}, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_node_protos_do_not_keep_a_copy_of_the_weights_per_pass():
    """upb frees deleted repeated elements only with their message's arena: tf2onnx's own
    ``update_proto`` keeps every pass's copy of a constant (10 passes: about 400 MB for 40 MB);
    with fresh node protos the graph holds one, and every node's protobuf is byte-identical."""
    patched, plain = _child("patched"), _child("plain")
    assert patched["digest"] == plain["digest"]
    assert plain["grown_mb"] > 300  # the leak this guards against is still there without the patch
    assert patched["grown_mb"] < 100


def test_patch_is_undone_after_the_conversion():
    import tf2onnx
    from tf2onnx.graph import Node

    from optimizer.graph.convert import _fresh_node_protos

    original = Node.update_proto
    with _fresh_node_protos(tf2onnx):
        assert Node.update_proto is not original
    assert Node.update_proto is original
