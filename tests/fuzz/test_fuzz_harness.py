"""The fuzz harness itself: it must tell a clean ending from a traceback, a hang and a memory
blow-up, or every family built on it proves nothing."""
import numpy as np
import pytest

import tuner.cli.cmd_models as cmd_models


@pytest.mark.parametrize("rc, err, raised, kind", [
    (0, "", None, "ok"),
    (0, "accel-tune: warning: dynamic batch dimension set to 1\n", None, "ok"),
    (2, "accel-tune: error: no built-in model named 'x'\n", None, "error"),
    (2, "accel-tune: warning: w\naccel-tune: error: bad\n", None, "error"),
    (2, "accel-tune: error: a\naccel-tune: error: b\n", None, "bad:exit 2 with 2 stderr lines"),
    (2, "Traceback (most recent call last):\n  ...\n", None, "bad:exit 2 with 2 stderr lines"),
    (1, "", None, "bad:exit 1"),
    (None, "", "RecursionError: x", "bad:RecursionError: x"),
])
def test_classify(rc, err, raised, kind):
    from conftest import classify
    assert classify(rc, err, raised) == kind


def test_clean_endings(cli):
    assert cli(["models", "--json"]).kind == "ok"
    o = cli(["simulate", "--model", "no-such-model", "--hw", "edge-npu"])
    assert o.kind == "error" and o.rc == 2


def test_internal_error_is_bad(cli, monkeypatch):
    def boom(args):
        raise RuntimeError("internal")
    monkeypatch.setattr(cmd_models, "run", boom)
    assert cli(["models"]).kind == "bad:RuntimeError: internal"


def test_hang_is_bad(cli, monkeypatch):
    def spin(args):
        while True:
            pass
    monkeypatch.setattr(cmd_models, "run", spin)
    o = cli(["models"], timeout_s=0.5)
    assert o.kind == "bad:timeout after 0.5 s" and o.seconds < 5


def test_memory_blowup_is_bad(cli, monkeypatch):
    def hog(args):
        return int(np.ones(2**31, dtype=np.float64).sum())  # 16 GiB
    monkeypatch.setattr(cmd_models, "run", hog)
    assert cli(["models"], mem_gib=1).kind == "bad:memory bound exceeded"
    monkeypatch.undo()
    assert cli(["models", "--json"]).kind == "ok"  # the cap was lifted again
