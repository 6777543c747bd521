"""ONNX's backend conformance suite through load_onnx + interpret (partition/onnx/conformance.py):
every case as the installed onnx ships or generates it passes, or is refused in one line for a
documented reason; none gives a wrong output or an internal error. Plus the runner's own checks
(the comparison and the refusal classification) on cases built here."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from partition.onnx import conformance as oc

# Passing cases with onnx 1.23 (measured by experiments/onnx_conformance.py); a drop is a regression.
PASS_FLOOR = 1631


@pytest.fixture(scope="module")
def outcomes():
    why = oc.available()
    if why:
        pytest.skip(why)
    cases = oc.load_cases()
    if not cases:
        pytest.skip("the installed onnx ships no conformance cases and generates none")
    return oc.run_suite(cases)


def _show(os_):
    return "\n".join(f"{o.status} {o.kind}/{o.name}: {o.message}" for o in os_[:40])


def test_no_wrong_output_and_no_internal_error(outcomes):
    bad = list(oc.iter_failures(outcomes))
    assert not bad, f"{len(bad)} cases failed:\n{_show(bad)}"


def test_every_refusal_is_one_documented_line(outcomes):
    keys = {k for k, _, _ in oc.REFUSAL_REASONS}
    refused = [o for o in outcomes if o.status == "refused"]
    assert refused  # the suite has ops the IR refuses (training losses, old opsets)
    odd = [o for o in refused if o.reason not in keys or "\n" in o.message or not o.message]
    assert not odd, _show(odd)


def test_pass_count_does_not_drop(outcomes):
    summary = oc.summarize(outcomes)
    assert summary["outcomes"]["pass"] >= PASS_FLOOR, summary


# ---------------------------------------------------------------------------- the runner itself

def _model(node, ins, outs, opset=21):
    g = helper.make_graph([node], "g", ins, outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_run_case_passes_and_catches_a_wrong_expected_output():
    m = _model(helper.make_node("Relu", ["x"], ["y"]), [_vi("x", [2, 3])], [_vi("y", [2, 3])])
    x = np.array([[-1, 2, -3], [4, -5, 6]], np.float32)
    good = oc.Case("relu", "node", m, (((x,), (np.maximum(x, 0),)),))
    assert oc.run_case(good).status == "pass"
    bad = oc.Case("relu", "node", m, (((x,), (x,)),))
    out = oc.run_case(bad)
    assert out.status == "wrong" and "max abs diff 5" in out.message


def test_run_case_classifies_refusals():
    old = _model(helper.make_node("Relu", ["x"], ["y"]), [_vi("x", [2])], [_vi("y", [2])], opset=9)
    o = oc.run_case(oc.Case("old", "node", old, (((np.ones(2, np.float32),), (np.ones(2, np.float32),)),)))
    assert (o.status, o.reason) == ("refused", "opset")
    loss = _model(helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"]),
                  [_vi("x", [2, 3]), _vi("t", [2], TensorProto.INT64)], [_vi("y", [])])
    o = oc.run_case(oc.Case("nll", "node", loss, ()))
    assert (o.status, o.reason) == ("refused", "training-only")
    assert oc.classify_refusal("something odd happened") == ""


def test_compare_checks_count_shape_dtype_and_values():
    a = np.array([1.0, 2.0], np.float32)
    assert oc.compare([a], [a * (1 + 1e-4)], 1e-3, 1e-7) == ""
    assert "2 outputs" in oc.compare([a], [a, a], 1e-3, 1e-7)
    assert "shape" in oc.compare([a], [a[:1]], 1e-3, 1e-7)
    assert "dtype" in oc.compare([a], [a.astype(np.float64)], 1e-3, 1e-7)
    assert "differs" in oc.compare([a], [a * 1.01], 1e-3, 1e-7)
    assert oc.compare([np.array([np.nan])], [np.array([np.nan])], 1e-3, 1e-7) == ""
    assert "differs" in oc.compare([np.array([1, 2])], [np.array([1, 3])], 1e-3, 1e-7)
