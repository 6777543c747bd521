"""The control-flow example of TVM's BYOC talk: a reshape and an add around a Loop whose body runs
conv2d + bias + relu (the composite an accelerator offloads) and an If choosing how to combine it
with the carried value. The body is a closed graph holding its own weights."""
from __future__ import annotations

import numpy as np

from ..builder import GraphBuilder
from ..ir import Graph

TRIPS = 3
C, H, W = 8, 8, 8


def _body(seed: int) -> Graph:
    b = GraphBuilder.for_model("byoc_demo.body", seed)
    b.input("iter", (), "int64")
    cond = b.input("cond", (), "bool")
    h = b.input("h", (1, C, H, W))
    w = b.normal("conv.weight", (C, C, 3, 3), np.sqrt(2.0 / (C * 9)))
    y = b.conv2d(h, w, strides=(1, 1), pads=(1, 1, 1, 1), groups=1, name="conv")
    y = b.bias_add(y, b.normal("conv.bias", (C,), 0.05), axis=1, name="bias")
    y = b.relu(y, name="relu")
    # iteration 0 keeps a residual connection, later ones damp the activation
    first = b.less(b.graph.inputs[0], b.const(np.int64(1), "one"), name="is_first")
    then_b = GraphBuilder.for_model("byoc_demo.then", seed)
    ty, th = then_b.input("y", y.shape), then_b.input("h", h.shape)
    then_g = then_b.finish([then_b.add(ty, th, name="residual")])
    else_b = GraphBuilder.for_model("byoc_demo.else", seed)
    ey, _ = else_b.input("y", y.shape), else_b.input("h", h.shape)
    else_g = else_b.finish([else_b.mul(ey, else_b.const(np.float32(0.5), "half"), name="damp")])
    z = b.op("if", [first, y, h], {"then_branch": then_g, "else_branch": else_g}, name="choose")
    return b.finish([cond, z])


def build(seed: int = 0) -> Graph:
    b = GraphBuilder.for_model("byoc_demo", seed)
    x = b.input("x", (1, C * H * W))
    a = b.reshape(x, shape=(1, C, H, W), name="to_nchw")
    a = b.add(a, b.normal("offset", (1, C, 1, 1), 0.1), name="offset_add")
    trip = b.const(np.int64(TRIPS), "trip_count")
    go = b.const(np.array(True), "keep_going")
    out = b.op("loop", [trip, go, a], {"body": _body(seed), "num_carried": 1}, name="loop")
    out = b.reshape(out, shape=(1, C * H * W), name="to_flat")
    out = b.add(out, x, name="skip_add")
    return b.finish([out], model="byoc_demo")
