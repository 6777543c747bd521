"""Compare accel-tune's simulator with SCALE-Sim results.

    python experiments/validate_scalesim.py ../shared/oracle/scalesim.jsonl [--json] [--fidelity analytical|tile]

Each case runs with ``scalesim_schedule`` (SCALE-Sim's mapping) on SCALE-Sim's machine (its array,
dataflow, SRAM sizes, and its three per-operand DRAM channels summed into one port).
"""
from __future__ import annotations

import argparse
import json
import sys

from sim.validate.scalesim_files import OracleError
from sim.validate.scalesim import validate_file


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file", help="SCALE-Sim results, one JSON object a line")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--fidelity", choices=("analytical", "tile"), default="tile")
    a = p.parse_args(argv)
    try:
        out = validate_file(a.file, a.fidelity)
    except (OracleError, ValueError) as e:
        print(f"validate_scalesim: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    hdr = f"{'case':52s} {'compute ours/ss':>19s} {'total ours/ss':>19s} {'dram rd ours/ss':>21s} {'dram wr ours/ss':>21s}"
    print(hdr)
    for r in out["cases"]:
        o, s = r["ours"], r["scalesim"]
        print(f"{r['id'][:52]:52s} {o['compute_cycles']:9d}/{s['compute_cycles']:<9d} {o['total_cycles']:9d}/{s['total_cycles']:<9d} "
              f"{o['dram_read_bytes']:10d}/{s['dram_read_bytes']:<10d} {o['dram_write_bytes']:10d}/{s['dram_write_bytes']:<10d}")
    print(json.dumps(out["summary"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
