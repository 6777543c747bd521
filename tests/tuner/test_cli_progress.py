"""Progress bars of the slow CLI steps: on stderr only, only on a terminal unless asked, never with
--json unless asked, and never changing stdout."""
from __future__ import annotations

import argparse
import json

import pytest

from tuner.cli import main
from tuner.cli.progress import progress_enabled


class _Stream:
    def __init__(self, tty: bool):
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


@pytest.mark.parametrize("mode, as_json, tty, want", [
    ("auto", False, True, True), ("auto", False, False, False), ("auto", True, True, False),
    ("always", True, False, True), ("always", False, False, True), ("never", False, True, False)])
def test_when_a_bar_is_shown(mode, as_json, tty, want):
    args = argparse.Namespace(progress=mode, json=as_json)
    assert progress_enabled(args, _Stream(tty)) is want


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code == 0, err
    return out, err


@pytest.mark.parametrize("argv, step", [
    (["models", "bert_tiny", "byoc_demo"], "byoc_demo"),
    (["simulate", "--model", "bert_tiny", "--hw", "edge-npu"], "partitioning"),
    (["simulate", "--model", "bert_tiny", "--hw", "edge-npu", "--json"], "costing")])
def test_bar_on_stderr_only_and_stdout_unchanged(capsys, argv, step):
    plain, err = _run(capsys, *argv)
    assert err == ""  # stderr is not a terminal under pytest: no bar
    shown, err = _run(capsys, *argv, "--progress", "always")
    assert step in err and shown == plain
    if "--json" in argv:
        json.loads(shown)


def test_run_and_report_name_their_steps(capsys, tmp_path):
    plan = tmp_path / "p.zip"
    _run(capsys, "tune", "--model", "bert_tiny", "--hw", "edge-npu", "--trials", "0", "-o", str(plan), "--json")
    out, err = _run(capsys, "run", str(plan), "--progress", "always")
    assert "loading the plan" in err and "running one inference" in err and "simulated latency" in out
    from tuner.sweep.report import FIGURES, report_dir
    from tuner.sweep import parse_spec, run_sweep
    spec = parse_spec({"name": "p", "base": "edge-npu", "trials": 0, "axes": {"array.rows": [8, 16]},
                       "models": [{"name": "bert_tiny"}]})
    run_sweep(spec, tmp_path / "sw", progress=False)
    told = []
    report_dir(tmp_path / "sw", tmp_path / "r.html", on_figure=told.append)
    assert told == [f"{f} figure" for f in FIGURES]
    out, err = _run(capsys, "report", str(tmp_path / "sw"), "--progress", "always", "--json")
    assert "search figure" in err and json.loads(out)["figures"]
