"""Multi-level model speed: mappings evaluated per CPU second by ``sim.cost.engines.batch`` (both
engines: ``jit``, the numba-compiled closed form of the ``fast`` extra, and ``numpy``) on a
5-level eyeriss-like hierarchy (DRAM, global buffer, ifmap / weight / psum scratchpads in each of
168 PEs on a 14 x 12 mesh) for VGG-16 conv layer 5 (C128 M256 R3 S3 P56 Q56, as in Timeloop's
exercise 06), and the one-by-one model (``sim.cost.movement.evaluate``) for comparison.

    python experiments/bench/multilevel_speed.py [--json] [--n 400000] [--chunk 65536] [--seed 0] [--repeat 3]

Random mappings (every prime factor of every dim placed on a random temporal or spatial slot of a
random level, random loop orders, random bypass where a level may choose) are drawn as arrays,
filtered with ``check_batch`` (as a mapper filters), and the legal ones evaluated in chunks.
Every output is computed: per level and data space reads, fills and updates, utilized instances,
compute cycles, cycles and energy (``BatchEvaluation``), as ``movement.evaluate`` gives them.
Rates are per CPU second of this process (``time.process_time``), ``--repeat`` passes over all
legal mappings (the median is the figure; every pass is kept); wall time is reported too, with
the machine's load average and whether the best engine's median meets issue 12's target
(TARGET). For the jit engine the bench also reports the time to get the compiled kernel (the
warm-up on the first chunk: numba compiles a (hierarchy, nest) shape's kernel once per machine and
caches it on disk; not in the rates) and the kernel's share of ``evaluate_batch`` (the kernel
timed alone on the same chunks; the rest: allocating the outputs and the result object).
Results and the configuration go to experiments/results/multilevel_speed/ (latest.json; every run
appended to history.jsonl).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from sim.hw.hierarchy import Arithmetic, Hierarchy, StorageLevel
from sim.mapping.mapping import prime_factors
from sim.cost.engines import jit as movement_jit
from sim.cost.movement import evaluate
from sim.cost.engines.batch import OK, MappingArrays, _structure, check_batch, evaluate_batch
from sim.workload.nest import conv2d

TARGET = 1e6      # mappings per CPU second (issue 12)
OUT = Path(__file__).resolve().parents[1] / "results" / "multilevel_speed"


def eyeriss_5level() -> Hierarchy:
    """Energies are Accelergy's for Timeloop's eyeriss_like (tl06 ERT, pJ per access)."""
    return Hierarchy((
        StorageLevel("DRAM", word_bits=8, block_size=8, read_pj=512.0, fill_pj=512.0, update_pj=512.0),
        StorageLevel("shared_glb", capacity_words=131072, word_bits=8, block_size=8, read_pj=33.7,
                     fill_pj=31.9, update_pj=31.9, leak_pj_per_cycle=0.0055, read_bandwidth=16, write_bandwidth=16),
        StorageLevel("ifmap_spad", capacity_words=24, word_bits=8, block_size=2, instances=168, mesh_x=14,
                     read_pj=0.71, fill_pj=0.87, update_pj=0.87, keeps={"Inputs"}, read_bandwidth=2, write_bandwidth=2),
        StorageLevel("weights_spad", capacity_words=384, word_bits=8, block_size=2, instances=168, mesh_x=14,
                     read_pj=1.52, fill_pj=1.98, update_pj=1.98, keeps={"Weights"}, read_bandwidth=2, write_bandwidth=2),
        StorageLevel("psum_spad", capacity_words=16, word_bits=16, block_size=1, instances=168, mesh_x=14,
                     read_pj=0.86, fill_pj=1.0, update_pj=1.0, keeps={"Outputs"}, read_bandwidth=2, write_bandwidth=2),
    ), Arithmetic("mac", instances=168, mesh_x=14, mac_pj=0.56))


def random_arrays(hier: Hierarchy, nest, n: int, rng) -> MappingArrays:
    L, D, S = len(hier.levels), len(nest.dims), len(nest.data_spaces)
    t = np.ones((n, L, D), np.int64)
    sx = np.ones((n, L, D), np.int64)
    sy = np.ones((n, L, D), np.int64)
    spatial_levels = [i for i in range(L) if hier.fanout(i) != (1, 1)]
    # most factors outside the small scratchpads, as a mapper's mapspace would propose them
    where = np.array([0.4, 0.4] + [0.2 / (L - 2)] * (L - 2))
    for k, (_, b) in enumerate(nest.dims):
        for p in prime_factors(b):
            lvl = rng.choice(L, n, p=where)
            kind = rng.integers(0, 4, n)            # 0-1 temporal, 2 X, 3 Y (only where the level fans out)
            fans = np.isin(lvl, spatial_levels)
            kind = np.where(fans, kind, 0)
            for arr, sel in ((t, kind < 2), (sx, kind == 2), (sy, kind == 3)):
                rows = np.flatnonzero(sel)
                arr[rows, lvl[rows], k] *= p
    perm = np.argsort(rng.random((n, L, D)), axis=2)
    may = np.array([[lv.may_keep(ds.name) for ds in nest.data_spaces] for lv in hier.levels])
    keep = may[None] & (rng.random((n, L, S)) < 0.75)
    keep[:, 0] = True
    keep[:, 2:] = may[None, 2:]                    # the scratchpads keep their one tensor
    return MappingArrays(t, sx, sy, perm, keep)


def _kernel_cpu(hier, nest, part) -> float:
    """CPU seconds of the compiled kernel alone on ``part`` (outputs allocated beforehand)."""
    st = _structure(hier, nest)
    out = movement_jit.outputs(len(part), st.L, st.S)
    c0 = time.process_time()
    movement_jit.run(st, part, out)
    return time.process_time() - c0


def _which_kernel(hier, nest) -> str:
    """Which compiled kernel the timed chunks used (movement_jit.run's rule)."""
    ready = movement_jit.kernel_for(movement_jit.shape_of(_structure(hier, nest)))[1]
    return "generated for this shape" if ready else "generic"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=400_000, help="random mappings drawn")
    ap.add_argument("--chunk", type=int, default=65536, help="mappings per evaluate_batch call")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timed passes of the jit engine (median reported)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    hier = eyeriss_5level()
    nest = conv2d(c=128, m=256, r=3, s=3, p=56, q=56, name="vgg16_conv5")
    rng = np.random.default_rng(a.seed)
    arrays = random_arrays(hier, nest, a.n, rng)

    c0 = time.process_time()
    codes = check_batch(hier, nest, arrays)
    check_cpu = time.process_time() - c0
    legal = arrays.take(np.flatnonzero(codes == OK))
    nl = len(legal)
    rates = {}
    compile_s = None
    for engine in (["jit"] if movement_jit.available() else []) + ["numpy"]:
        w0 = time.perf_counter()
        # warm-up on one chunk: compiles what the timed chunks use (for jit, the kernel generated
        # for this shape when a chunk has movement_jit.SPECIALISE_ROWS rows or more)
        evaluate_batch(hier, nest, legal.take(slice(0, min(nl, a.chunk))), engine=engine)
        if engine == "jit":
            compile_s = time.perf_counter() - w0
        passes = []
        for _ in range(a.repeat if engine == "jit" else 1):
            cpu = wall = kcpu = 0.0
            fallback = 0
            for lo in range(0, nl, a.chunk):
                part = legal.take(slice(lo, lo + a.chunk))
                c0, w0 = time.process_time(), time.perf_counter()
                ev = evaluate_batch(hier, nest, part, engine=engine)
                cpu += time.process_time() - c0
                wall += time.perf_counter() - w0
                fallback += ev.fallback
                if engine == "jit":
                    kcpu += _kernel_cpu(hier, nest, part)
            passes.append({"per_cpu_s": nl / cpu if cpu else None, "per_wall_s": nl / wall if wall else None,
                           "kernel_share": kcpu / cpu if engine == "jit" and cpu else None,
                           "fallback_rows": fallback})
        med = sorted(passes, key=lambda r: r["per_cpu_s"] or 0)[len(passes) // 2]
        rates[engine] = dict(med, passes=passes)
    # one by one, for comparison
    k = min(nl, 300)
    c0 = time.process_time()
    for b in range(k):
        evaluate(hier, nest, legal.mapping(hier, nest, b), check=False)
    one_cpu = (time.process_time() - c0) / max(k, 1)
    out = {"config": {"n": a.n, "chunk": a.chunk, "seed": a.seed, "nest": nest.name,
                      "dims": dict(nest.dims), "levels": list(hier.names), "macs": hier.arithmetic.instances},
           "outputs": "reads, fills, updates [level, data space], utilized instances, compute cycles, "
                      "cycles, energy",
           "jit_kernel_ready_s": compile_s,
           "jit_kernel": _which_kernel(hier, nest) if "jit" in rates else None,
           "legal": nl, "check_per_cpu_s": a.n / check_cpu if check_cpu else None,
           "evaluate": rates, "one_by_one_per_cpu_s": 1 / one_cpu if one_cpu else None,
           "load_average_1min": os.getloadavg()[0], "target_per_cpu_s": TARGET,
           "target_met": max(r["per_cpu_s"] or 0 for r in rates.values()) >= TARGET,
           "target_rule": "median of the passes of the best engine, mappings per CPU second"}
    OUT.mkdir(parents=True, exist_ok=True)
    out["when_utc"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (OUT / "latest.json").write_text(json.dumps(out, indent=2) + "\n")
    with open(OUT / "history.jsonl", "a") as f:     # every run, so repeats are kept side by side
        f.write(json.dumps(out) + "\n")
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{nest.name} on {', '.join(hier.names)} (+{hier.arithmetic.instances} MACs): "
          f"{nl:,} legal of {a.n:,} random mappings")
    print(f"  check_batch                  {out['check_per_cpu_s']:>14,.0f} mappings / CPU-s")
    for engine, r in rates.items():
        every = "; passes " + ", ".join(f"{p['per_cpu_s']:,.0f}" for p in r["passes"]) if len(r["passes"]) > 1 else ""
        print(f"  evaluate_batch ({engine:5s})     {r['per_cpu_s']:>14,.0f} mappings / CPU-s "
              f"({1e9 / r['per_cpu_s']:,.0f} ns each; {r['per_wall_s']:,.0f} / wall-s; "
              f"{r['fallback_rows']} rows one by one{every})")
        if r["kernel_share"] is not None:
            print(f"    compiled kernel {r['kernel_share']:.0%} of it (the rest: allocating outputs); "
                  f"{out['jit_kernel']} kernel ready in {out['jit_kernel_ready_s']:.2f} s "
                  f"(compiled once per machine and cached; not in the rate)")
    print(f"  outputs: {out['outputs']}")
    print(f"  movement.evaluate            {out['one_by_one_per_cpu_s']:>14,.0f} mappings / CPU-s (one by one)")
    print(f"  target {TARGET:,.0f} mappings / CPU-s: {'met' if out['target_met'] else 'NOT met'}")
    print(f"  (load average {out['load_average_1min']:.1f} on this machine while measuring)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
