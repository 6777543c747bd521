import pytest

from partition import Graph
from sim import Workload, WorkloadError
from sim import workload_of


def test_conv_output_size_and_gemm_view():
    wl = Workload.conv2d(1, 3, 224, 224, 64, 7, 7, stride=2, pad=3)
    assert (wl.p, wl.q) == (112, 112)
    assert wl.gemm_view() == (1, 112 * 112, 64, 3 * 49)
    assert wl.macs == 112 * 112 * 64 * 147


def test_depthwise_is_one_workload_with_groups():
    wl = Workload.conv2d(2, 32, 28, 28, 32, 3, 3, pad=1, groups=32)
    assert wl.gemm_view() == (32, 2 * 28 * 28, 1, 9)
    assert wl.operand_elems() == {"ifmap": 2 * 32 * 28 * 28, "weight": 32 * 9, "output": 2 * 32 * 28 * 28}


def test_asymmetric_pads_strides_dilations():
    wl = Workload.conv2d(1, 8, 10, 12, 4, 3, 3, stride=(1, 2), pad=(0, 1, 1, 0), dilation=(2, 1))
    assert wl.p == (10 + 0 + 1 - 2 * 2 - 1) // 1 + 1
    assert wl.q == (12 + 1 + 0 - 2 - 1) // 2 + 1


@pytest.mark.parametrize("kwargs,msg", [
    (dict(groups=3), "groups=3 must divide"),
    (dict(r=30), "conv2d output is empty"),
])
def test_bad_conv(kwargs, msg):
    base = dict(n=1, c=4, h=8, w=8, k=4, r=3, s=3)
    base.update(kwargs)
    with pytest.raises(WorkloadError, match=msg):
        Workload.conv2d(**base)


def test_key_is_stable_and_distinguishes():
    a = Workload.gemm(128, 768, 768)
    assert a.key == Workload.gemm(128, 768, 768).key
    assert a.key != Workload.gemm(128, 768, 768, epilogue=("gelu",)).key
    assert hash(a) == hash(Workload.gemm(128, 768, 768))


def _g():
    return Graph("t")


def test_from_node_conv_dense_matmul_batch_matmul():
    g = _g()
    x = g.add_input("x", (1, 16, 14, 14))
    w = g.add_const(__import__("numpy").zeros((32, 4, 3, 3), "float32"), "w")
    b = g.add_const(__import__("numpy").zeros((32,), "float32"), "b")
    conv = g.add_node("conv2d", [x, w, b], {"strides": (2, 2), "pads": (1, 1, 1, 1), "groups": 4})
    wl = workload_of(conv)
    assert wl.gemm_view() == (4, 7 * 7, 8, 4 * 9)
    assert wl.epilogue == ("bias_add",)
    a = g.add_input("a", (2, 5, 64))
    wd = g.add_const(__import__("numpy").zeros((10, 64), "float32"), "wd")
    dense = g.add_node("dense", [a, wd])
    assert workload_of(dense).gemm_view() == (1, 10, 10, 64)
    q = g.add_input("q", (12, 128, 64))
    k = g.add_input("k", (12, 128, 64))
    bmm = g.add_node("batch_matmul", [q, k], {"transpose_b": True})
    assert workload_of(bmm).gemm_view() == (12, 128, 128, 64)
    mm = g.add_node("matmul", [q, g.add_input("k2", (12, 64, 32))])
    assert workload_of(mm).gemm_view() == (12, 128, 32, 64)


def test_from_node_vector_ops():
    g = _g()
    x = g.add_input("x", (1, 8, 16, 16))
    relu = workload_of(g.add_node("relu", [x]))
    assert relu.kind == "elementwise" and relu.d["out_elems"] == 8 * 256 and relu.d["special_ops"] == 0
    pool = workload_of(g.add_node("max_pool2d", [x], {"kernel": (2, 2), "strides": (2, 2)}))
    assert pool.kind == "pool" and pool.d["out_elems"] == 8 * 64 and pool.d["ops"] == 8 * 64 * 4
    sm = workload_of(g.add_node("softmax", [x]))
    assert sm.kind == "softmax" and sm.d["special_ops"] == 8 * 256
    rs = workload_of(g.add_node("reshape", [x], {"shape": (1, -1)}))
    assert rs.kind == "data_move" and rs.d["in_elems"] == 0  # a view moves nothing
    tr = workload_of(g.add_node("transpose", [x], {"perm": (0, 2, 3, 1)}))
    assert tr.kind == "data_move" and tr.d["in_elems"] == tr.d["out_elems"] == 8 * 256


def test_from_node_unknown_op_is_one_line():
    g = _g()
    boxes = g.add_input("b", (1, 10, 4))
    scores = g.add_input("s", (1, 1, 10))
    nms = g.add_node("non_max_suppression", [boxes, scores], {"max_output_boxes_per_class": 3})
    with pytest.raises(WorkloadError, match="op 'non_max_suppression' has no accelerator workload"):
        workload_of(nms)
