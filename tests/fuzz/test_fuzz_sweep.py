"""Fuzz family "sweep": sweep spec files through ``accel-tune sweep``.

Each case is one spec built from the case's seed: random axes (lists and ranges, values inside and
outside the fields' ranges, tied fields, huge ranges), sampling, constraints, models and options;
base hardware files with bad values or in a cycle; file-level faults (YAML aliases, binary and
oversized files, devices, unknown keys); and spaces far too large to enumerate, which a budget
(``--limit``) must visit lazily. A valid spec must run (every row finite and positive, or an error
row), an invalid one must end in one error line, and nothing may hang: the harness bounds time
and memory.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from fuzzgen import FORMATS, Case, bad_value, choose, finite, in_range, ok_value, write
from sim.hw.configfile import MAX_CONFIG_BYTES
from sim.hw.config import field_rules
from tuner.sweep.spec import MAX_AXIS_VALUES, MAX_POINTS, MAX_TRIALS, METRICS

FAMILY = "sweep"
RULES = {p: r for p, r, _ in field_rules()}
# Fields whose values leave the machine able to run a small model (no buffer so small that nothing
# fits is needed to test the spec machinery; the hw family covers every field).
AXIS_FIELDS = ["array.rows", "array.cols", "dram.bytes_per_cycle", "clock.freq_mhz", "vector.lanes",
               "link.bytes_per_s", "link.launch_latency_s", "energy.mac_pj", "area.pe_mm2",
               "host.peak_flops", "dram.latency_cycles"]
MODELS = ["byoc_demo", "ssd_detector"]


def _check_run(out_dir: Path):
    def check(out) -> None:
        s = json.loads(out.out)
        assert s["evaluated"] <= 1 and not s["failed"], s
        assert s["remaining"] is None or s["remaining"] >= 0
        res = out_dir / "results.jsonl"  # not created when nothing was evaluated (--limit 0)
        rows = [json.loads(x) for x in res.read_text().splitlines() if x.strip()] if res.exists() else []
        assert len(rows) == s["evaluated"]  # a fresh folder: every row is this run's
        for r in rows:
            assert finite(r["area_mm2"], positive=True), r
            if r.get("error"):
                assert r["latency_s"] is None or finite(r["latency_s"])
                continue
            assert finite(r["latency_s"], positive=True) and finite(r["energy_j"], positive=True), r
            assert finite(r["edp"], positive=True)
            for m in r["models"].values():
                assert finite(m["latency_s"], positive=True) and 0 <= m["utilization"] <= 1 + 1e-9, m
    return check


def _axis(rng, valid: list[bool]):
    path = choose(rng, AXIS_FIELDS)
    rule = RULES[path]
    form = rng.random()
    if form < 0.6:
        n = int(rng.integers(1, 4))
        vals, seen = [], set()
        for _ in range(n):
            v = ok_value(rng, rule) if rng.random() < 0.8 else bad_value(rng, rule)
            key = json.dumps(v, default=str)  # how the spec tells a value listed twice
            valid.append(in_range(rule, v) and key not in seen)
            vals.append(v)
            seen.add(key)
        return path, vals
    if form < 0.85:  # a range: small, huge or malformed
        lo = ok_value(rng, rule)
        kind = int(rng.integers(5))
        if kind == 0:
            r = {"start": lo, "stop": lo, "step": 1}
        elif kind == 1:
            r = {"start": 1, "stop": 10**9, "step": 1}                    # a billion values
        elif kind == 2:
            r = {"start": 1e-300, "stop": 1e300, "factor": 1.000001}
        elif kind == 3:
            r = {"start": lo, "stop": choose(rng, [float("inf"), float("nan"), -1]), "step": 1}
        else:
            r = {"start": 1, "stop": 8, "factor": choose(rng, [1, 0.5, -2])}
        valid.append(kind == 0 and in_range(rule, lo))
        return path, r
    valid.append(False)
    return path, choose(rng, [[], "8", {"start": 1}, {"start": 1, "stop": 4, "step": 1, "factor": 2}, [[8, 8]]])


def _spec(rng, tmp: Path) -> list[Case]:
    valid: list[bool] = []
    axes = {}
    for _ in range(int(rng.integers(0, 4))):
        flags: list[bool] = []
        path, vals = _axis(rng, flags)
        if path not in axes:  # a field appears once: a repeat is dropped with its validity
            axes[path] = vals
            valid += flags
    d: dict = {"name": "fz", "base": choose(rng, ["edge-npu", "cloud-npu", "eyeriss-like"]), "trials": 0,
               "axes": axes, "models": [{"name": choose(rng, MODELS), "trials": int(rng.integers(0, 3))}]}
    if rng.random() < 0.3:
        count = choose(rng, [1, 3, 0, -1, MAX_POINTS + 1, 2.5])
        d["sampling"] = {"method": "random", "count": count}
        valid.append(isinstance(count, int) and 1 <= count <= MAX_POINTS)
    if rng.random() < 0.3:
        metric = choose(rng, [*METRICS, "power"])
        bound = choose(rng, ["max", "min"])
        limit = choose(rng, [1e9, 0.0, float("inf"), float("nan"), "x", 1e-9])
        d["constraints"] = {f"{bound}_{metric}": limit}
        valid.append(metric in METRICS and isinstance(limit, float) and np.isfinite(limit))
    if rng.random() < 0.2:
        key, val, ok = choose(rng, [("objective", "energy", True), ("objective", "speed", False),
                                    ("seed", -1, False), ("seed", 2**40, True), ("trials", MAX_TRIALS + 1, False),
                                    ("warm_start", "yes", False), ("share_cost_model", False, True),
                                    ("extra_key", 1, False), ("name", "a\nb", False), ("name", "fz2", True)])
        d[key] = val
        valid.append(ok)
    if rng.random() < 0.15:
        label, ok = choose(rng, [("../../x", False), (".hid", False), ("a\\b", False), ("fine-label", True)])
        d["models"][0]["label"] = label
        valid.append(ok)
    out_dir = tmp / "out"
    spec = write(tmp / "spec", d, choose(rng, FORMATS))
    limit = choose(rng, ["0", "1", "1", "1"])
    argv = ["sweep", str(spec), "-o", str(out_dir), "--limit", limit, "--json", "--no-progress"]
    # A valid spec may still end in one error line: constraints may reject every point.
    return [Case("spec " + json.dumps(d, default=str)[:200], argv, "any" if all(valid) else "error",
                 _check_run(out_dir))]


def _large(rng, tmp: Path) -> list[Case]:
    """Spaces too large to enumerate: a budget must visit them lazily, or they are refused."""
    out_dir = tmp / "out"
    kind = int(rng.integers(4))
    big = {"array.rows": {"start": 1, "stop": 2000, "step": 1}, "array.cols": {"start": 1, "stop": 2000, "step": 1}}
    d = {"name": "big", "base": "edge-npu", "trials": 0, "axes": big, "models": ["byoc_demo"]}
    if kind == 0:
        argv, expect, label = ["--limit", "1"], "ok", "4,000,000-point grid, --limit 1"
    elif kind == 1:
        argv, expect, label = [], "error", "4,000,000-point grid, no limit"
    elif kind == 2:
        d["sampling"] = {"method": "random", "count": 2}
        argv, expect, label = ["--limit", "1"], "ok", "4,000,000-point grid sampled at random"
    else:
        d["axes"] = {"array.rows": {"start": 1, "stop": MAX_AXIS_VALUES * 10**5, "step": 1}}
        argv, expect, label = ["--limit", "1"], "error", "one axis of a billion values"
    spec = write(tmp / "spec", d, choose(rng, FORMATS))
    return [Case(label, ["sweep", str(spec), "-o", str(out_dir), "--json", "--no-progress", *argv], expect,
                 _check_run(out_dir))]


def _bomb() -> str:
    lines = ["x0: &x0 [a, a, a, a, a, a, a, a, a, a]"]
    lines += [f"x{i}: &x{i} [{', '.join([f'*x{i - 1}'] * 10)}]" for i in range(1, 9)]
    return "name: s\nbase: edge-npu\nmodels: [byoc_demo]\n" + "\n".join(lines) + "\n"


def _file(rng, tmp: Path) -> list[Case]:
    kind = int(rng.integers(14))
    p = tmp / "spec.toml"
    body = '[[models]]\nname = "byoc_demo"\ntrials = 0\n'
    argv_extra: list[str] = ["--limit", "1"]
    expect = "error"
    if kind == 0:
        p = tmp / "spec.yaml"
        p.write_text(_bomb())
        label = "YAML alias bomb"
    elif kind == 1:
        p.write_text(f'base = "spec.toml"\n{body}')
        label = "base names the spec itself"
    elif kind == 2:
        (tmp / "a.toml").write_text('base = "b.yaml"\n')
        (tmp / "b.yaml").write_text("base: a.toml\n")
        p.write_text(f'base = "a.toml"\n{body}')
        label = "base hardware files in a cycle"
    elif kind == 3:
        field_, value = choose(rng, [("clock.freq_mhz", "inf"), ("link.bytes_per_s", "nan"),
                                     ("dram.bytes_per_cycle", "1e-300"), ("array.rows", "4294967296"),
                                     ("link.launch_latency_s", "-inf")])
        sec, f = field_.split(".")
        (tmp / "hw.toml").write_text(f'base = "edge-npu"\n[{sec}]\n{f} = {value}\n')
        p.write_text(f'base = "hw.toml"\n{body}')
        label = f"base hardware file with {field_} = {value}"
    elif kind == 4:
        p = tmp / f"spec.{choose(rng, FORMATS)}"
        p.write_bytes(rng.integers(0, 256, size=int(rng.integers(1, 2048)), dtype=np.uint8).tobytes())
        label = "random bytes"
    elif kind == 5:
        p.symlink_to("/dev/zero")
        label = "/dev/zero"
    elif kind == 6:
        with open(p, "w") as f:
            f.write(f'base = "edge-npu"\n{body}' + "#\n" * (MAX_CONFIG_BYTES // 2 + 1))
        label = "over the size cap"
    elif kind == 7:
        os.mkfifo(p)
        label = "FIFO"
    elif kind == 8:
        p = tmp / "spec.json"
        depth = int(rng.integers(1000, 50_000))
        p.write_text('{"axes": ' + "[" * depth + "]" * depth + "}")
        label = "nested arrays"
    elif kind == 9:
        p.write_text('base = "edge-npu"\n')
        label = "no models"
    elif kind == 10:
        p.write_text(f'base = "edge-npu"\n[axes]\n"array.rows" = [8, 8]\n{body}')
        label = "an axis value twice"
    elif kind == 11:
        p.write_text(f'base = "edge-npu"\n[axes]\n"array.rows" = [8]\n"array.rows,array.cols" = [16]\n{body}')
        label = "a field on two axes"
    elif kind == 12:
        opt = choose(rng, [["--limit", "-1"], ["--processes", "0"], ["--workers", "0"], ["--limit", "x"]])
        p.write_text(f'base = "edge-npu"\n{body}')
        argv_extra = opt
        label = f"bad option {' '.join(opt)}"
    else:
        p.write_text(f'base = "edge-npu"\n[axes]\n"array.rows" = [8, 16]\n{body}')
        expect = "ok"
        label = "a plain valid spec"
    out_dir = tmp / "out"
    return [Case(f"file: {label}", ["sweep", str(p), "-o", str(out_dir), "--json", "--no-progress", *argv_extra],
                 expect, _check_run(out_dir))]


def make_cases(seed: int, tmp: Path) -> list[Case]:
    rng = np.random.default_rng(seed)
    kind = rng.random()
    if kind < 0.55:
        return _spec(rng, tmp)
    if kind < 0.65:
        return _large(rng, tmp)
    return _file(rng, tmp)


def test_fuzz_sweep(fuzz_case, fuzz_seed, cli, fuzz_check, tmp_path):
    for case in make_cases(fuzz_seed + fuzz_case, tmp_path):
        out = fuzz_check(FAMILY, case.label, cli(case.argv, timeout_s=60))
        assert case.expect in ("any", out.kind), f"{case.label}: expected {case.expect}, got {out.kind}: {out.err}"
        if out.kind == "ok" and case.check is not None:
            case.check(out)
