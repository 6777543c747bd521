"""torchvision detectors exported with their full post-processing (tests/data/zoo/det_*: SSD,
RetinaNet, FCOS, Faster R-CNN; TorchScript and dynamo exporters): import, match onnxruntime on several images
(so the data-dependent output sizes agree too, not only the values), and cost at the upper bound.
tests/tuner/test_zoo_end_to_end.py tunes, packs and runs them back like every zoo file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

import sim  # noqa: E402
from partition import Interpreter, interpret, load_onnx  # noqa: E402
from partition.models import count_macs  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"
FILES = sorted(p.name for p in ZOO.glob("det_*.onnx"))


def _images(path: Path) -> list[np.ndarray]:
    """The export's example image and three more random ones, darker and brighter (so the detectors
    keep different numbers of boxes). Not flat images: their many exactly tied scores leave the
    order of equal-score boxes to float rounding, in either runtime."""
    x = np.load(ZOO / (path.name.split(".")[0] + ".npz"))["in_0"]
    rng = np.random.default_rng(11)
    return [x] + [(rng.random(x.shape) * scale).astype(np.float32) for scale in (0.3, 1.0, 2.0)]


def _ort(path: Path, x: np.ndarray) -> list[np.ndarray]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {sess.get_inputs()[0].name: x})


class _SizeRecorder(Interpreter):
    """The interpreter, noting (run-time rows, bound rows) of every NonZero / NMS output."""

    def __init__(self, graph, functions=None):
        super().__init__(graph, functions)
        self.sizes: list[tuple[int, int]] = []

    def run_node(self, node, args):
        outs = super().run_node(node, args)
        if node.op in ("non_zero", "non_max_suppression"):
            axis = 1 if node.op == "non_zero" else 0
            self.sizes.append((outs[0].shape[axis], node.outputs[0].shape[axis]))
        return outs

    def run_subgraph(self, graph, args):
        sub = _SizeRecorder(graph, self.functions)
        outs = sub.run(args, bounded=True)
        self.sizes += sub.sizes
        return outs


def _same_detections(ours: list[np.ndarray], ref: list[np.ndarray]) -> None:
    """Same count, scores and labels in order; each box equal to the reference's at its row, or to
    one of a box whose score ties with it within float32 rounding (the order of two detections
    whose scores differ in the last bit depends on each runtime's summation order)."""
    (b, s, lab), (rb, rs, rlab) = ours, ref
    assert b.shape == rb.shape and s.shape == rs.shape and lab.shape == rlab.shape
    np.testing.assert_allclose(s, rs, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(lab, rlab)
    for i in range(len(b)):
        tied = np.nonzero((np.abs(rs - s[i]) <= 1e-5 * max(1.0, abs(s[i]))) & (rlab == lab[i]))[0]
        assert any(np.allclose(b[i], rb[j], rtol=1e-4, atol=1e-3) for j in [i, *tied]), (i, b[i], rb[i])


def test_zoo_holds_four_detectors_from_both_exporters():
    stems = {f.split(".")[0] for f in FILES}
    assert {"det_ssd", "det_retinanet", "det_fcos", "det_fasterrcnn"} <= stems
    assert all(f"{s}.ts.onnx" in FILES and f"{s}.dynamo.onnx" in FILES for s in stems)


@pytest.mark.parametrize("fname", FILES)
def test_detector_matches_onnxruntime_on_several_images(fname):
    path = ZOO / fname
    g = load_onnx(path)
    bounds = [v.shape[0] for v in g.outputs]
    sizes: list[tuple] = []  # run-time sizes of the data-dependent ops, per image
    for x in _images(path):
        rec = _SizeRecorder(g)
        ours, ref = rec.run([x]), _ort(path, x)
        _same_detections(ours, ref)
        assert all(o.shape[0] <= b for o, b in zip(ours, bounds))  # never beyond the type
        sizes.append(tuple(rec.sizes))
    # the images keep different numbers of candidates, below the static bounds
    assert len(set(sizes)) > 1
    assert any(got < bound for per_image in sizes for got, bound in per_image)


@pytest.mark.parametrize("fname", [f for f in FILES if ".ts." in f])
def test_detector_costs_at_the_upper_bound(fname):
    """Costing walks the bound types: the host cost of the post-processing is what the bound says,
    whatever an image keeps; the graph's MACs are the backbone's and the heads' convolutions."""
    g = load_onnx(ZOO / fname)
    assert count_macs(g) > 1_000_000
    dyn = [n for n in g.nodes if n.op in ("non_zero", "non_max_suppression", "dyn_topk")]
    assert dyn and all(o.type.size > 0 for n in dyn for o in n.outputs)
    cost = sim.cost_graph(g, sim.load_hw("edge-npu"))
    assert cost.host_s > 0 and np.isfinite(cost.host_s)


# ---------------------------------------------------------------------------- RoiAlign (Faster R-CNN's box head)

@pytest.mark.parametrize("mode", ["avg", "max"])
@pytest.mark.parametrize("ctm, opset", [("half_pixel", 16), ("output_half_pixel", 16), (None, 13)])
@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_onnxruntime(mode, ctm, opset, ratio):
    from onnx import TensorProto, helper
    attrs = dict(mode=mode, output_height=3, output_width=4, sampling_ratio=ratio, spatial_scale=0.5)
    if ctm is not None:
        attrs["coordinate_transformation_mode"] = ctm
    node = helper.make_node("RoiAlign", ["x", "rois", "idx"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 9, 11]),
                                        helper.make_tensor_value_info("rois", TensorProto.FLOAT, [5, 4]),
                                        helper.make_tensor_value_info("idx", TensorProto.INT64, [5])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    rng = np.random.default_rng(opset + ratio)
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    # boxes inside, across the border, beyond it, degenerate (zero size) and tiny
    rois = np.array([[2, 3, 14, 12], [-4, -2, 6, 5], [18, 14, 30, 26], [5, 5, 5, 5], [1, 1, 1.5, 2]], np.float32)
    idx = np.array([0, 1, 1, 0, 1], np.int64)
    feeds = {"x": x, "rois": rois, "idx": idx}
    ours = interpret(load_onnx(model.SerializeToString()), feeds)[0]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(ours, sess.run(None, feeds)[0], rtol=1e-5, atol=1e-5)
