"""torchvision detectors exported with their full post-processing (tests/data/zoo/det_*: SSD,
RetinaNet, FCOS; TorchScript and dynamo exporters): import, match onnxruntime on several images
(so the data-dependent output sizes agree too, not only the values), and cost at the upper bound.
tests/tuner/test_zoo_end_to_end.py tunes, packs and runs them back like every zoo file."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

import sim  # noqa: E402
from partition import interpret, load_onnx  # noqa: E402
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


def test_zoo_holds_three_detectors_from_both_exporters():
    stems = {f.split(".")[0] for f in FILES}
    assert {"det_ssd", "det_retinanet", "det_fcos"} <= stems
    assert all(f"{s}.ts.onnx" in FILES and f"{s}.dynamo.onnx" in FILES for s in stems)


@pytest.mark.parametrize("fname", FILES)
def test_detector_matches_onnxruntime_on_several_images(fname):
    path = ZOO / fname
    g = load_onnx(path)
    bounds = [v.shape[0] for v in g.outputs]
    counts = []
    for x in _images(path):
        ours, ref = interpret(g, [x]), _ort(path, x)
        assert [o.shape for o in ours] == [r.shape for r in ref]
        for a, r in zip(ours, ref):
            np.testing.assert_allclose(a, r, rtol=1e-4, atol=1e-4)
        counts.append(ours[0].shape[0])
        assert all(o.shape[0] <= b for o, b in zip(ours, bounds))  # never beyond the type
    # the images keep different numbers of boxes, below the static bound
    assert len(set(counts)) > 1 and min(counts) < bounds[0]


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
