"""A small SSD-style detector: a strided conv backbone, box and class heads on two feature maps,
anchor box decoding (SSD variances 0.1/0.2) and per-class non-max suppression."""
from __future__ import annotations

import numpy as np

from ..builder import GraphBuilder
from ..ir import Graph, Value

NUM_CLASSES = 3
ASPECTS = (1.0, 2.0, 0.5)
MAX_PER_CLASS = 20


def anchors(grids: tuple[int, ...], scales: tuple[float, ...]) -> np.ndarray:
    """(cy, cx, h, w) per anchor in normalised image coordinates, row-major over each grid, one
    anchor per aspect ratio per cell, grids in head order."""
    out = []
    for g, s in zip(grids, scales):
        cy, cx = np.meshgrid((np.arange(g) + 0.5) / g, (np.arange(g) + 0.5) / g, indexing="ij")
        for y, x in zip(cy.ravel(), cx.ravel()):
            for a in ASPECTS:
                out.append((y, x, s / np.sqrt(a), s * np.sqrt(a)))
    return np.asarray(out, dtype=np.float32)


def _head(b: GraphBuilder, x: Value, per_anchor: int, name: str) -> Value:
    """conv head -> (1, H*W*A, per_anchor), anchors ordered as in ``anchors``."""
    y = b.conv(x, len(ASPECTS) * per_anchor, 3, name=name, gain=1.0)
    y = b.transpose(y, perm=(0, 2, 3, 1), name=f"{name}.nhwc")
    return b.reshape(y, shape=(1, x.shape[2] * x.shape[3] * len(ASPECTS), per_anchor), name=f"{name}.flat")


def build(seed: int = 0) -> Graph:
    b = GraphBuilder.for_model("ssd_detector", seed)
    x = b.input("image", (1, 3, 256, 256))
    y = x
    for i, ch in enumerate((16, 32, 64, 64)):
        y = b.conv_bn(y, ch, 3, stride=2, name=f"backbone.{i}")
    f1 = y                                                   # 16x16x64
    f2 = b.conv_bn(f1, 128, 3, stride=2, name="backbone.4")  # 8x8x128
    deltas = b.concat(_head(b, f1, 4, "box.0"), _head(b, f2, 4, "box.1"), axis=1, name="box.concat")
    logits = b.concat(_head(b, f1, NUM_CLASSES, "cls.0"), _head(b, f2, NUM_CLASSES, "cls.1"), axis=1,
                      name="cls.concat")
    anc = anchors((16, 8), (0.2, 0.45))
    n = anc.shape[0]
    a_cy, a_cx, a_h, a_w = (b.const(anc[None, :, i:i + 1], f"anchors.{k}") for i, k in enumerate("yxhw"))
    dy, dx, dh, dw = b.ops("split", [deltas], {"axis": 2, "sizes": (1, 1, 1, 1)}, name="decode.split")
    var_c, var_s = b.const(np.float32(0.1), "decode.center_variance"), b.const(np.float32(0.2), "decode.size_variance")
    cy = b.add(a_cy, b.mul(b.mul(dy, var_c), a_h), name="decode.cy")
    cx = b.add(a_cx, b.mul(b.mul(dx, var_c), a_w), name="decode.cx")
    half = b.const(np.float32(0.5), "decode.half")
    hh = b.mul(b.mul(a_h, b.exp(b.mul(dh, var_s))), half, name="decode.half_h")
    hw = b.mul(b.mul(a_w, b.exp(b.mul(dw, var_s))), half, name="decode.half_w")
    boxes = b.concat(b.sub(cy, hh), b.sub(cx, hw), b.add(cy, hh), b.add(cx, hw), axis=2, name="boxes")
    scores = b.transpose(b.sigmoid(logits, name="scores.sigmoid"), perm=(0, 2, 1), name="scores")
    selected = b.non_max_suppression(boxes, scores, max_output_boxes_per_class=MAX_PER_CLASS,
                                     iou_threshold=0.5, score_threshold=0.3, center_point_box=0, name="nms")
    assert boxes.shape == (1, n, 4)
    return b.finish([boxes, scores, selected], model="ssd_detector")
