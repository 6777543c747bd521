"""The CLI around the commands: --version, a reader that closes the pipe early, a missing optional
extra, and an output path that cannot be written (refused before any work, naming that path)."""
from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest

from tuner.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _one_error(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("accel-tune: error: "), err
    return err[0]


def test_version_comes_from_the_installed_metadata(capsys):
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"accel-tune {version('accel-tune')}"


def _closed_pipe(argv: list[str]) -> subprocess.CompletedProcess:
    """Run ``argv`` with its stdout a pipe whose reader is gone before the first write."""
    import os
    r, w = os.pipe()
    os.close(r)  # the reader is gone before the child writes anything
    try:
        p = subprocess.run(argv, stdout=w, stderr=subprocess.PIPE, timeout=120, cwd=ROOT)
    finally:
        os.close(w)
    return p


@pytest.mark.parametrize("args", [["models"], ["models", "--json"], ["hw", "list"], ["hw", "show", "edge-npu"]])
def test_closed_pipe_exits_quietly(args):
    p = _closed_pipe([sys.executable, "-m", "tuner", *args])
    assert p.stderr == b"" and p.returncode == 141, p.stderr.decode()[-500:]


def test_plan_readers_closed_pipe_exit_quietly(tmp_path, capsys):
    plan = tmp_path / "p.zip"
    assert main(["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "0", "-o", str(plan), "--json"]) == 0
    capsys.readouterr()
    for argv in ([sys.executable, "-m", "tuner", "inspect", str(plan), "--json"],
                 [sys.executable, "-m", "tuner", "inspect", str(plan), "--dot"],
                 [sys.executable, str(ROOT / "experiments" / "read_packed.py"), str(plan)],
                 [sys.executable, str(ROOT / "experiments" / "read_packed.py"), str(plan), "--json"]):
        p = _closed_pipe(argv)
        assert p.stderr == b"" and p.returncode == 141, (argv, p.stderr.decode()[-500:])


def test_report_without_matplotlib_is_one_line_with_the_hint(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    assert main(["report", str(tmp_path)]) == 2
    assert _one_error(capsys) == "accel-tune: error: accel-tune report needs matplotlib: pip install 'accel-tune[plot]'"


@pytest.mark.parametrize("target, msg", [
    ("/proc/plan.zip", "cannot write the plan /proc/plan.zip: "),           # read-only even for root
    ("{tmp}/no/such/plan.zip", "cannot write the plan {tmp}/no/such/plan.zip: folder {tmp}/no/such does not exist"),
    ("{tmp}", "cannot write the plan {tmp}: it is a folder"),
    ("{tmp}/afile/plan.zip", "cannot write the plan {tmp}/afile/plan.zip: folder {tmp}/afile does not exist"),
])
def test_tune_output_is_checked_before_any_tuning(tmp_path, capsys, monkeypatch, target, msg):
    (tmp_path / "afile").write_text("")

    def no_tuning(*a, **k):
        raise AssertionError("tuning started before the output was checked")
    monkeypatch.setattr(sys.modules["tuner.tune"], "tune", no_tuning)
    target, msg = target.format(tmp=tmp_path), msg.format(tmp=tmp_path)
    assert main(["tune", "--model", "byoc_demo", "--hw", "edge-npu", "-o", target]) == 2
    err = _one_error(capsys)
    assert err.startswith(f"accel-tune: error: {msg}") and ".packed-" not in err


def test_run_output_is_checked_before_running(tmp_path, capsys):
    assert main(["run", str(tmp_path / "missing.zip"), "-o", "/proc/out.npz"]) == 2
    assert "cannot write the outputs /proc/out.npz" in _one_error(capsys)


def test_plans_are_written_readable_by_all(tmp_path, capsys):
    out = tmp_path / "p.zip"
    assert main(["tune", "--model", "byoc_demo", "--hw", "edge-npu", "--trials", "0", "-o", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["plan_file"] == str(out)
    assert out.stat().st_mode & 0o777 == 0o644


@pytest.mark.parametrize("argv, msg", [
    ([], "accel-tune: error: the following arguments are required: COMMAND (see accel-tune --help)"),
    (["bogus"], "accel-tune: error: argument COMMAND: invalid choice: 'bogus'"),
    (["sweep", "s.toml", "-o", "o", "--limit", "x"],
     "accel-tune: error: sweep: argument --limit: invalid int value: 'x' (see accel-tune sweep --help)"),
    (["hw", "show"], "accel-tune: error: hw show: the following arguments are required: NAME|FILE"),
])
def test_usage_errors_are_one_line_too(capsys, argv, msg):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert _one_error(capsys).startswith(msg)
