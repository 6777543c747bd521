"""Ours vs the fabricated Eyeriss chip, layer by layer (issue 19, part 2).

    python experiments/validate_eyeriss.py [ORACLE_DIR] [--hw eyeriss-chip] [--rlc-zeros Z] [--json]

Reads ``ORACLE_DIR/alexnet.jsonl`` (default ../shared/oracle/eyeriss: the chip's measured
AlexNet CONV1-5 at batch 4 with the row-stationary parameters it ran, JSSC 2017 Tables V and
III) and prints, per layer, the chip's total latency (with off-chip transfers) beside ours at the
preset's clock: under the chip's own row-stationary mapping (``sim.mapping.row_stationary``,
its parameters rounded to divisors) and under the tool's mapping (the default mapping policy,
which has the row-stationary candidates in its space); both walked tile by tile
(``fidelity="tile"``, the cost `accel-tune tune` and `run` use). Then the median and worst
error on the total latency (target: median <= 20 %).

The chip compresses ifmaps and ofmaps on its link by run-length coding (RLC) and the preset does
not; ``--rlc-zeros Z`` (default 0.4, the middle of the 0-80 % of zeros the paper reports) shows
what that compression would change: Eyeriss's RLC packs three (5-bit run, 16-bit value) pairs in
a 64-bit word (JSSC 2017, its RLC description), so a stream with a fraction Z of zeros (runs of up to 31
zeros folded into the next pair) takes (1 - Z) x 21/16 x 64/63 of its raw bits (never more than
raw: the chip may send raw data); weights are not compressed. Our per-tensor DRAM words of the
layer give the link's effective speed-up, applied to the DRAM level's bandwidths.

A second table costs the 13 convolutions of VGG-16 at batch 3 with the mapping left to the tool,
beside the chip's measured total latency per layer from JSSC 2017 Table VI (as transcribed in
cucapra/fodlam, data/eyeriss-vgg16.csv). On eyeriss-chip the tool's mapping is one of the chip's
row-stationary family (the preset's ``mapspace.family``). The last two columns check the preset's
global-buffer ports against the silicon without any mapping of ours: the chip's processing
latency (without the link) beside the time its measured buffer accesses take at those ports.

The core is ``sim.validate.eyeriss`` (``compare``, ``vgg16``; tests/sim/test_validate_eyeriss.py
runs it on the oracle rows); ``--json`` prints everything it computed, with the configuration.
"""
from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.hw.config import HardwareError, load_hw  # noqa: E402
from sim.validate.eyeriss import LayerResult, compare, read_rows, summary, vgg16  # noqa: E402

DEFAULT_ORACLE = ROOT.parent / "shared" / "oracle" / "eyeriss"


def _table(title: str, results: list[LayerResult]) -> str:
    lines = [title, f"{'layer':8} {'chip ms':>9} {'ours ms':>9} {'error':>7} {'chip RS':>9} {'with RLC':>9} "
                    f"{'DRAM MB':>8} {'chip MB':>8} {'chip proc':>9} {'GLB bound':>9}"]
    def opt(x: float | None, width: int) -> str:
        return f"{x:{width}.1f}" if x is not None else f"{'-':>{width}}"
    for r in results:
        lines.append(f"{r.layer:8} {r.measured_ms:9.1f} {r.tool_ms:9.1f} {r.error:+7.0%} {opt(r.chip_mapping_ms, 9)} "
                     f"{r.tool_rlc_ms:9.1f} {r.tool_dram_mb:8.1f} {opt(r.measured_dram_mb, 8)} "
                     f"{opt(r.measured_processing_ms, 9)} {opt(r.glb_bound_ms, 9)}")
    s = summary(results)
    lines.append(f"median |error| {s['median_abs_error']:.0%}, worst {s['worst_abs_error']:.0%}; with RLC: median "
                 f"{s['median_abs_error_rlc']:.0%}, worst {s['worst_abs_error_rlc']:.0%}; total {s['total_ours_ms']:.1f} ms "
                 f"ours vs {s['total_measured_ms']:.1f} ms measured")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("oracle", nargs="?", default=str(DEFAULT_ORACLE), help="folder with alexnet.jsonl")
    ap.add_argument("--hw", default="eyeriss-chip", help="hardware preset or file (default eyeriss-chip)")
    ap.add_argument("--rlc-zeros", type=float, default=0.4, help="fraction of zeros in ifmaps/ofmaps for the RLC "
                                                                  "column (0..1, default 0.4)")
    ap.add_argument("--no-vgg", action="store_true", help="skip the VGG-16 table")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    def fail(msg: str) -> int:       # bad input: one line, no usage block, no traceback
        print(f"validate_eyeriss.py: error: {msg}", file=sys.stderr)
        return 2
    if not 0.0 <= a.rlc_zeros <= 1.0:
        return fail(f"--rlc-zeros must be within 0..1, got {a.rlc_zeros}")
    if not (Path(a.oracle) / "alexnet.jsonl").is_file():
        return fail(f"no alexnet.jsonl in {a.oracle}")
    try:
        hw = load_hw(a.hw)
    except HardwareError as e:
        return fail(str(e))
    alex = compare(read_rows(Path(a.oracle)), hw, a.rlc_zeros)
    vgg = [] if a.no_vgg else vgg16(hw, a.rlc_zeros)
    if a.json:
        print(json.dumps({"config": {"hw": hw.name, "fingerprint": hw.fingerprint(), "oracle": str(a.oracle),
                                     "rlc_zeros": a.rlc_zeros, "fidelity": "tile"},
                          "alexnet": {"layers": [asdict(r) | {"error": r.error} for r in alex], **summary(alex)},
                          "vgg16": {"layers": [asdict(r) | {"error": r.error} for r in vgg], **(summary(vgg) if vgg else {})}},
                         indent=1))
        return 0
    print(f"hardware {hw.name} ({hw.fingerprint()[:12]}), tile-level walk, RLC column at {a.rlc_zeros:.0%} zeros")
    print(_table("AlexNet CONV1-5, batch 4, against the chip (JSSC 2017 Table V; chip RS = its Table III mapping)", alex))
    if vgg:
        print()
        print(_table("VGG-16 CONV layers, batch 3, mapping left to the tool (chip: JSSC 2017 Table VI)", vgg))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
