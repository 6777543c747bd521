"""Whether a memory-bound probe tells another tenant's memory traffic where the phase probe does
not (issue 19, docs/TUNING.md and experiments/results/calibration_unseen/runs.md, twenty-third
session: tried in ``calibrate --host``'s phase gate and taken out again).

    python experiments/memory_probe.py [--seconds 60] [--calm 30] [--seed 9] [--json]

First ``--calm`` seconds of readings on the quiet machine, then ``--seconds`` beside
experiments/contention.py's bursts of memory traffic (``--seed``; its log tells which readings fell
in a burst). A reading is the phase probe's default latency (``calibrate_context.default_latency``
of ``phase_probe``, as the gate reads it) and the memory probe's: a matrix-vector product whose
matrix is 4x the last-level cache (``memory_probe``), 10 runs after 3 in a session kept open whose
threads do not spin (``MemorySession``; opening one on the matrix took 150 of a 180 ms reading).
Prints, per probe, the percentiles of its latency calm, between bursts and in them, over the
lowest calm reading, and the share of readings over 1.3, 1.5, 1.6 and 1.7x that lowest: a useful
gap catches most readings in a burst and none calm. Run it on an otherwise quiet machine.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

GAPS = (1.3, 1.5, 1.6, 1.7)
PROBES = ("phase_s", "memory_s")


def last_level_cache_bytes(caches: list[str] | None = None, default: int = 32 << 20) -> int:
    """The largest of ``caches`` (lines such as "L3 Unified 8192K"; default this machine's, as the
    host calibration's fingerprint reads them from sysfs: ``tuner.calibration._caches``), or
    ``default`` where none states a size."""
    if caches is None:
        from tuner.calibration import _caches
        caches = _caches()
    sizes = []
    for line in caches:
        text = line.split()[-1].upper() if line.split() else ""
        unit = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:], 1)
        digits = text.rstrip("KMG")
        if digits.isdigit():
            sizes.append(int(digits) * unit)
    return max(sizes, default=default)


def memory_probe(cache_bytes: int | None = None) -> bytes:
    """An ONNX MatMul [1, 1024] x [1024, N] of float32, its matrix 4x ``cache_bytes`` (the
    last-level cache's) kept within 16-128 MB: each run streams the matrix from memory."""
    from onnx import TensorProto, helper, numpy_helper
    size = min(max(4 * (cache_bytes or last_level_cache_bytes()), 16 << 20), 128 << 20)
    k = 1024
    n = size // (4 * k)
    w = numpy_helper.from_array(np.random.default_rng(0).random((k, n), dtype=np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "memory_probe",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


class MemorySession:
    """The memory probe's onnxruntime session, opened once; its threads do not spin once a run
    ends (``session.intra_op.allow_spinning`` 0), so it takes no core between readings."""

    def __init__(self, model: bytes):
        import onnxruntime as ort
        so = ort.SessionOptions()
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        self.feed = {"x": np.random.default_rng(0).random((1, 1024), dtype=np.float32)}

    def latency(self, runs: int = 10, warmup: int = 3) -> float:
        """The median of ``runs`` runs after ``warmup`` (seconds)."""
        for _ in range(warmup):
            self.session.run(None, self.feed)
        wall = []
        for _ in range(max(1, runs)):
            t = time.perf_counter()
            self.session.run(None, self.feed)
            wall.append(time.perf_counter() - t)
        return float(np.median(wall))


def readings(seconds: float, phase: bytes, memory: MemorySession) -> list[dict]:
    """Readings (wall-clock start and end, both probes' latencies) for ``seconds``."""
    from tuner.calibrate_context import default_latency
    out, end = [], time.time() + seconds
    while time.time() < end:
        t0 = time.time()
        r = {"t0": t0, "phase_s": default_latency(phase), "memory_s": memory.latency()}
        r["t1"] = time.time()
        out.append(r)
    return out


def in_burst(r: dict, bursts: list[tuple[float, float]]) -> str | None:
    """"in" when a burst covers the reading, "out" when none touches it, None when one ends or
    starts during it."""
    overlap = sum(max(0.0, min(r["t1"], s + d) - max(r["t0"], s)) for s, d in bursts)
    return "in" if overlap >= r["t1"] - r["t0"] else "out" if overlap == 0 else None


def summary(calm: list[dict], contended: list[dict], bursts: list[tuple[float, float]]) -> dict:
    """Per probe and per condition (calm, between bursts, in them): how many readings, their
    latency's percentiles (0, 10, 50, 90, 99, 100) over the lowest calm one, and the share of
    readings over each of ``GAPS`` times it."""
    groups = {"calm": calm, "between": [r for r in contended if in_burst(r, bursts) == "out"],
              "in_burst": [r for r in contended if in_burst(r, bursts) == "in"]}
    out = {}
    for probe in PROBES:
        floor = min(r[probe] for r in calm)
        out[probe] = {"floor_s": floor}
        for name, rs in groups.items():
            v = np.array([r[probe] for r in rs]) / floor
            out[probe][name] = {"readings": len(rs),
                                "percentiles": [float(x) for x in np.percentile(v, [0, 10, 50, 90, 99, 100])]
                                if len(v) else [],
                                "over": {str(g): float(np.mean(v > g)) if len(v) else None for g in GAPS}}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=60.0, help="readings beside the bursts (default 60)")
    ap.add_argument("--calm", type=float, default=30.0, help="readings before them (default 30)")
    ap.add_argument("--seed", type=int, default=9, help="contention.py's seed (default 9)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    if not (a.seconds > 0 and a.calm > 0):
        print("memory_probe: --seconds and --calm must be > 0", file=sys.stderr)
        return 2
    from tuner.calibrate_context import phase_probe
    phase, memory = phase_probe(), MemorySession(memory_probe())
    calm = readings(a.calm, phase, memory)
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "bursts.log")
        here = os.path.dirname(os.path.abspath(__file__))
        tenant = subprocess.Popen([sys.executable, os.path.join(here, "contention.py"), "--seed", str(a.seed),
                                   "--seconds", str(a.seconds), "--log", log],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            contended = readings(a.seconds, phase, memory)
        finally:
            tenant.wait()
        with open(log) as f:
            bursts = [tuple(map(float, line.split())) for line in f if line.strip()]
    s = summary(calm, contended, bursts)
    if a.json:
        print(json.dumps(s, indent=2))
        return 0
    for probe in PROBES:
        print(f"{probe}: lowest calm reading {s[probe]['floor_s'] * 1e3:.3f} ms")
        for name in ("calm", "between", "in_burst"):
            g = s[probe][name]
            pct = " ".join(f"{x:.2f}" for x in g["percentiles"])
            over = " ".join(f">{k}x {v:.0%}" for k, v in g["over"].items() if v is not None)
            print(f"  {name:>9} {g['readings']:>4} readings  x lowest (0/10/50/90/99/100 %): {pct}   {over}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
