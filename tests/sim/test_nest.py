"""Loop nests: projections, tile extents, constructors, and the nest of today's Workload."""
import math

import pytest

from sim.workload.nest import DataSpace, Nest, NestError, batch_matmul, conv1d, conv2d, gemm, nest_from_workload
from sim.workload.workload import Workload


def test_conv2d_sizes_follow_projections():
    n = conv2d(c=8, m=16, r=3, s=3, p=10, q=12, n=2, stride=2, dilation=1)
    assert n.macs == 2 * 8 * 16 * 3 * 3 * 10 * 12
    assert n.size("Weights") == 16 * 8 * 9
    assert n.size("Inputs") == 2 * 8 * (2 * 9 + 2 + 1) * (2 * 11 + 2 + 1)   # stride*(P-1) + R
    assert n.size("Outputs") == 2 * 16 * 10 * 12
    assert n.output.name == "Outputs"
    assert n.data_space("Weights").dims == frozenset("MCRS")


def test_tile_is_bounding_box_of_projection():
    ds = conv1d(c=4, k=4, r=3, p=16, dilation=2).data_space("Inputs")
    # every point of the box, projected, then the bounding box per rank, counted by brute force
    span = {"C": 2, "R": 3, "P": 5}
    pts = {(c, 2 * r + p) for c in range(2) for r in range(3) for p in range(5)}
    box = math.prod(max(x[i] for x in pts) - min(x[i] for x in pts) + 1 for i in range(2))
    assert ds.tile_words({"N": 1, **span}) == box == 2 * (2 * 2 + 4 + 1)


def test_grouped_and_depthwise():
    g = conv2d(c=8, m=8, r=3, s=3, p=4, q=4, groups=8)
    assert g.bounds["G"] == 8 and g.bounds["C"] == 1 and g.bounds["M"] == 1
    assert g.size("Weights") == 8 * 9
    assert g.macs == 8 * 9 * 16
    with pytest.raises(NestError, match="groups=3"):
        conv2d(c=8, m=8, r=1, s=1, p=1, q=1, groups=3)


def test_gemm_and_batch_matmul():
    assert gemm(4, 5, 6).size("Inputs") == 24
    b = batch_matmul(3, 4, 5, 6)
    assert b.size("Weights") == 90 and b.macs == 360


def test_from_workload_matches_workload_macs_and_sizes():
    w = Workload.conv2d(n=1, c=16, h=14, w=14, k=32, r=3, s=3, stride=1, pad=1, groups=4)
    n = nest_from_workload(w)
    assert n.macs == w.macs
    ops = w.operand_elems()
    assert n.size("Weights") == ops["weight"]
    assert n.size("Outputs") == ops["output"]
    # padding is not part of the nest: the input extent is (P-1)+R = 16, not 14
    assert n.size("Inputs") == 16 * 16 * 16
    g = Workload.gemm(m=8, n=4, k=16, batch=3)
    assert nest_from_workload(g).macs == g.macs
    with pytest.raises(NestError, match="no MAC loop nest"):
        nest_from_workload(Workload.vector("elementwise", 4, 4, 4))


@pytest.mark.parametrize("build, words", [
    (lambda: Nest("x", (("A", 0),), (DataSpace("O", ((("A", 1),),), True),)), "bound"),
    (lambda: Nest("x", (("A", 2),), (DataSpace("O", ((("B", 1),),), True),)), "unknown dim B"),
    (lambda: Nest("x", (("A", 2),), (DataSpace("O", ((("A", 1),),), False),)), "exactly one"),
    (lambda: DataSpace("O", ((("A", 0),),)), "coefficient"),
    (lambda: Nest("x", (("A", 2), ("A", 3)), ()), "twice"),
])
def test_bad_nests_give_one_line(build, words):
    with pytest.raises(NestError) as e:
        build()
    assert words in str(e.value) and "\n" not in str(e.value)
