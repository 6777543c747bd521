"""Tile-level walk speed (``sim.cost.walk.walk``): CPU time of one walk of one mapping of a VGG/ResNet
conv layer on the 5-level eyeriss preset (DRAM, global buffer, ifmap / filter / psum scratchpads
in 168 PEs), at the default step cap and beside it, and on random legal mappings of the
5-level hierarchy of experiments/bench/multilevel_speed.py; with the walk's cycles over the
closed form's.

    python experiments/bench/walk_speed.py [--json] [--random 40] [--repeat 5] [--seed 0]

The preset layers use their default mapping (``sim.cost.multilevel.kernel_mapping``: ``sim.mapping.policy``);
times are per walk (``time.process_time``, best of ``--repeat``), the closed form's one-by-one
``sim.cost.movement.evaluate`` beside them. Results go to experiments/results/walk_speed/latest.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

import sim
from sim.hw.config_hierarchy import hierarchy_of
from sim.cost.movement import evaluate
from sim.cost.engines.batch import OK, check_batch
from sim.cost.multilevel import kernel_mapping
from sim.workload.nest import conv2d, nest_from_workload
from sim.cost.walk import DEFAULT_MAX_STEPS, walk

sys.path.insert(0, str(Path(__file__).resolve().parent))
from multilevel_speed import eyeriss_5level, random_arrays  # noqa: E402  (the same random mappings)

OUT = Path(__file__).resolve().parents[1] / "results" / "walk_speed"
LAYERS = {
    "vgg16_conv5 (C128 M256 56x56 3x3)": sim.Workload.conv2d(1, 128, 56, 56, 256, 3, 3, pad=1),
    "vgg16_conv11 (C512 M512 14x14 3x3)": sim.Workload.conv2d(1, 512, 14, 14, 512, 3, 3, pad=1),
    "resnet50_res3 (C128 M128 28x28 3x3)": sim.Workload.conv2d(1, 128, 28, 28, 128, 3, 3, pad=1),
    "resnet50_res2 1x1 (C64 M256 56x56)": sim.Workload.conv2d(1, 64, 56, 56, 256, 1, 1),
}
CAPS = (1 << 10, DEFAULT_MAX_STEPS, 1 << 17)


def _cpu(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        c0 = time.process_time()
        fn()
        best = min(best, time.process_time() - c0)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--random", type=int, default=40, help="random legal mappings walked")
    ap.add_argument("--repeat", type=int, default=5, help="timing repeats (best kept)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    hw = sim.load_hw("eyeriss")
    hier = hierarchy_of(hw)
    rows = []
    for name, wl in LAYERS.items():
        m, _, ev = kernel_mapping(wl, hw)
        nest = nest_from_workload(wl)
        row = {"layer": name, "analytical_cycles": ev.cycles,
               "closed_form_ms": 1e3 * _cpu(lambda: evaluate(hier, nest, m, check=False), a.repeat), "caps": []}
        for cap in CAPS:
            w = walk(hier, nest, m, max_steps=cap, check=False)
            ms = 1e3 * _cpu(lambda: walk(hier, nest, m, max_steps=cap, check=False), a.repeat)
            row["caps"].append({"max_steps": cap, "steps": w.steps, "cycles": w.cycles, "ms": ms,
                                "ratio": w.cycles / ev.cycles})
        rows.append(row)

    bench_hier = eyeriss_5level()
    nest = conv2d(c=128, m=256, r=3, s=3, p=56, q=56, name="vgg16_conv5")
    rng = np.random.default_rng(a.seed)
    arrays = random_arrays(bench_hier, nest, 20 * a.random, rng)
    legal = np.flatnonzero(check_batch(bench_hier, nest, arrays) == OK)[:a.random]
    times, ratios = [], []
    for b in legal:
        m = arrays.mapping(bench_hier, nest, int(b))
        c0 = time.process_time()
        w = walk(bench_hier, nest, m, check=False)
        times.append(1e3 * (time.process_time() - c0))
        ratios.append(w.cycles / w.analytical_cycles)
    rnd = {"mappings": len(legal), "ms_median": float(np.median(times)) if times else None,
           "ms_p90": float(np.percentile(times, 90)) if times else None,
           "ratio_median": float(np.median(ratios)) if ratios else None,
           "ratio_max": float(max(ratios)) if ratios else None}
    out = {"config": {"preset": hw.name, "levels": list(hier.names), "default_max_steps": DEFAULT_MAX_STEPS,
                      "repeat": a.repeat, "seed": a.seed},
           "layers": rows, "random_mappings": rnd, "load_average_1min": os.getloadavg()[0]}
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "latest.json").write_text(json.dumps(out, indent=2) + "\n")
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"walk of one mapping on {hw.name} ({', '.join(hier.names)}), CPU ms (best of {a.repeat})")
    print(f"  {'layer':38s} {'closed form':>11s} " + " ".join(f"{'cap ' + str(c):>24s}" for c in CAPS))
    for r in rows:
        cells = " ".join(f"{c['ms']:7.1f} ms {c['steps']:>7,} x{c['ratio']:4.2f}" for c in r["caps"])
        print(f"  {r['layer']:38s} {r['closed_form_ms']:8.2f} ms {cells}")
    print("  (per cap: CPU time, steps walked, walk cycles / closed-form cycles)")
    if rnd["mappings"]:
        print(f"  {rnd['mappings']} random legal mappings of vgg16_conv5 on the bench's 5-level hierarchy: "
              f"median {rnd['ms_median']:.1f} ms, p90 {rnd['ms_p90']:.1f} ms per walk; walk/closed-form cycles "
              f"median {rnd['ratio_median']:.2f}, max {rnd['ratio_max']:.2f}")
    print(f"  (load average {out['load_average_1min']:.1f} on this machine while measuring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
