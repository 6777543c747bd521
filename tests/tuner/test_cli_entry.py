"""The console entry point: user-facing warnings read as one line, like errors."""
import subprocess
import sys


def test_truncated_log_line_warns_in_one_line(tmp_path):
    log = tmp_path / "log.jsonl"
    log.write_text('{"workload": "conv2d(n=1')  # what a killed run leaves behind
    r = subprocess.run([sys.executable, "-m", "tuner", "tune", "--model", "resnet18", "--hw", "edge-npu",
                        "--trials", "2", "--log", str(log), "--json"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    warns = [ln for ln in r.stderr.replace("\r", "\n").splitlines() if "warning" in ln.lower()]
    assert warns and all(ln.startswith("accel-tune: warning: ") for ln in warns)
    assert "truncated" in warns[0]
    assert "warnings.warn" not in r.stderr and ".py:" not in r.stderr  # no file:line and source echo
