"""The HTML report: self-contained, every figure embedded, the front table equal to a brute-force
front; rendered in headless Chromium when one is installed."""
from __future__ import annotations

import base64
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from tuner.sweep.report import ReportError, build_report, report_dir


def _rows(n=12, seed=0):
    """Rows shaped like the runner's, from a toy analytic model: a bigger array is faster and
    larger; energy has a sweet spot. Two models per point, each with a breakdown and kernels."""
    rng = np.random.default_rng(seed)
    rows = []
    for i in range(n):
        pes = int(2 ** rng.integers(6, 12))
        area = 1.0 + pes * 0.0006
        models = {}
        for lab, macs in (("resnet18", 1.8e9), ("bert_tiny", 0.3e9)):
            dev = macs / (pes * 5e8) + rng.random() * 1e-4
            host, link = 2e-4, 3e-4
            e_dev = macs * 0.3e-12 + area * 1e-4
            models[lab] = {
                "latency_s": dev + host + link, "energy_j": e_dev + 1e-5, "edp": 0.0,
                "utilization": macs / (pes * 5e8 * (dev + host + link)), "measurements": int(40 - 2 * i),
                "breakdown": {"host": {"latency_s": host, "energy_j": 4e-6},
                              "link": {"latency_s": link, "energy_j": 6e-6},
                              "device": {"latency_s": dev, "energy_j": e_dev}},
                "kernels": [{"name": f"k{j}", "op": "conv2d" if j % 2 else "dense", "macs": int(macs / 8),
                             "dram_bytes": int(1e5 * (j + 1)), "cycles": int(macs / 8 / pes * 1.3)}
                            for j in range(8)]}
        rows.append({"key": f"k{i}", "point": f"p{i}", "index": i, "params": {"array.rows": pes},
                     "area_mm2": area, "pes": pes, "sram_kib": 384.0, "peak_gmacs": pes * 0.5,
                     "clock_mhz": 500.0, "dram_gb_per_s": 5.5, "models": models, "error": None,
                     "latency_s": sum(m["latency_s"] for m in models.values()),
                     "energy_j": sum(m["energy_j"] for m in models.values()), "eval_s": 1.0})
        rows[-1]["edp"] = rows[-1]["latency_s"] * rows[-1]["energy_j"]
    rows.append({"key": "bad", "point": "pbad", "index": n, "params": {"array.rows": 1}, "area_mm2": 1.0,
                 "pes": 1, "sram_kib": 1.0, "peak_gmacs": 0.5, "clock_mhz": 500.0, "dram_gb_per_s": 5.5,
                 "models": {}, "error": "ScheduleError: nothing fits", "latency_s": None, "energy_j": None,
                 "edp": None, "eval_s": 0.1})
    return rows


def _brute_front(rows):
    ok = [r for r in rows if r["error"] is None]
    c = [(r["latency_s"], r["energy_j"], r["area_mm2"]) for r in ok]
    return sorted(r["index"] for r, x in zip(ok, c)
                  if not any(all(a <= b for a, b in zip(y, x)) and y != x for y in c))


def test_report_is_self_contained_with_every_figure():
    rows = _rows()
    rep = build_report(rows, {"name": "toy", "objective": "latency", "base": "edge-npu"}, {"python": "3"})
    assert [f.id for f in rep.figures] == ["pareto", "area", "breakdown", "roofline", "search"]
    assert rep.points == 12
    assert sorted(rep.pareto) == _brute_front(rows)
    html = rep.html
    # No external fetch of any kind: the report must open offline.
    assert not re.search(r"(src|href)\s*=\s*['\"](https?:|//|file:)", html)
    assert "<script" not in html
    imgs = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(imgs) == 5
    for b in imgs:
        assert base64.b64decode(b)[:8] == b"\x89PNG\r\n\x1a\n"
    assert "ScheduleError: nothing fits" in html  # the failed point is listed, not hidden


def test_figures_without_data_are_left_out():
    rows = [dict(r, models={k: {kk: vv for kk, vv in m.items() if kk not in ("breakdown", "kernels")}
                            for k, m in r["models"].items()}) for r in _rows(5) if r["error"] is None]
    rep = build_report(rows, {})
    assert [f.id for f in rep.figures] == ["pareto", "area", "search"]


def test_no_successful_point_is_an_error(tmp_path):
    with pytest.raises(ReportError, match="no successfully evaluated design point"):
        build_report([r for r in _rows(3) if r["error"]])
    with pytest.raises(ReportError, match="holds no results.jsonl"):
        report_dir(tmp_path)


def _write_dir(d: Path, rows):
    d.mkdir(parents=True, exist_ok=True)
    (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + '{"key": "trunc')
    (d / "spec.json").write_text(json.dumps({"name": "toy", "objective": "energy"}))


def test_report_dir_reads_results_and_cli(tmp_path, capsys):
    from tuner.cli import main
    _write_dir(tmp_path / "sw", _rows())
    with pytest.warns(UserWarning, match="truncated"):
        rc = main(["report", str(tmp_path / "sw"), "-o", str(tmp_path / "r.html"), "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    assert out["figures"] == ["pareto", "area", "breakdown", "roofline", "search"]
    assert sorted(out["pareto"]) == _brute_front(_rows())
    assert (tmp_path / "r.html").read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(tmp_path / "none")]) == 2
    assert "accel-tune: error:" in capsys.readouterr().err


CHROMIUM = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)), None)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no chromium binary installed")
def test_report_renders_in_headless_chromium(tmp_path):
    _write_dir(tmp_path / "sw", _rows())
    with pytest.warns(UserWarning):
        path, rep = report_dir(tmp_path / "sw", tmp_path / "report.html")
    profile = tmp_path / "profile"
    base = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={profile}"]
    # The DOM as the browser parsed it (the figures are in it), then a screenshot to see them paint.
    dom = subprocess.run(base + ["--dump-dom", path.resolve().as_uri()], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0, dom.stderr[-500:]
    for fid in ("pareto", "area", "breakdown", "roofline", "search"):
        assert f'id="fig-{fid}"' in dom.stdout
    assert dom.stdout.count("data:image/png;base64,") == 4
    shot = tmp_path / "shot.png"
    r = subprocess.run(base + ["--window-size=1200,2400", f"--screenshot={shot}", path.resolve().as_uri()],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and shot.exists(), r.stderr[-500:]
    # The screenshot is not blank: the embedded figures paint many distinct colours.
    from matplotlib.image import imread
    img = imread(str(shot))
    assert img.shape[0] >= 2000 and len(np.unique(img.reshape(-1, img.shape[-1])[:, :3], axis=0)) > 50


def test_header_and_caption_count_the_same_front_and_two_sweeps_are_refused():
    rows = _rows()
    rep = build_report(rows, {"name": "toy"})
    n = len(rep.pareto)
    assert f"{n} on the latency-energy-area Pareto front" in rep.html
    assert f"circled: the {n} points" in rep.html
    # Rows of a second sweep under the same indices (a folder reused with another base): refused.
    other = [dict(r, point=r["point"] + "-other", key=r["key"] + "-other") for r in rows]
    with pytest.raises(ReportError, match="more than one sweep"):
        build_report(rows + other)
