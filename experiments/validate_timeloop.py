"""Compare the multi-level data-movement model with Timeloop on every oracle case, both input forms.

    python experiments/validate_timeloop.py ../shared/oracle/timeloop [--json]

For each case: the front end's processed input (+ the mapper's map for mapper runs) and, where the
case has them as plain files, the user's split arch/problem/map files; with the case's Accelergy
ERT/ART. Every storage level's reads, fills and updates of every tensor (totals over utilized
instances) must equal Timeloop's, cycles must be equal, total energy within 0.1 %.
"""
from __future__ import annotations

import argparse
import json
import sys

from sim.validate.timeloop import validate_dir


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", help="the Timeloop oracle folder (one JSON per case)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--rows", action="store_true", help="print every per-level per-tensor row")
    a = p.parse_args(argv)
    try:
        out = validate_dir(a.folder)
    except (ValueError, OSError) as e:
        print(f"validate_timeloop: error: {e}", file=sys.stderr)
        return 2
    if a.json:
        json.dump(out, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    print(f"{'case':36s} {'form':9s} {'counts equal':>12s} {'cycles ours/timeloop':>23s} "
          f"{'energy pJ ours':>16s} {'timeloop':>16s} {'rel err':>9s}")
    for r in out["results"]:
        if "error" in r:
            print(f"{r['case'][:36]:36s} {r['form']:9s} error: {r['error']}")
            continue
        print(f"{r['case'][:36]:36s} {r['form']:9s} {r['counts_equal']:>5d}/{r['counts']:<6d} "
              f"{r['cycles']:>11d}/{r['cycles_timeloop']:<11d} {r['energy_pj']:>16.2f} "
              f"{r['energy_pj_timeloop']:>16.2f} {r['energy_rel_err']:>9.2e}")
        if a.rows:
            for row in r["rows"]:
                print(f"    {row['level'][:20]:20s} {row['tensor'][:10]:10s} {row['what']:18s} "
                      f"{row['ours']:>16} {row['timeloop']:>16} {'ok' if row['ok'] else 'DIFF'}")
        for m in r["mismatches"]:
            print(f"    DIFF {m['level']} {m['tensor']} {m['what']}: ours {m['ours']} timeloop {m['timeloop']}")
    s = out["summary"]
    print(f"{s['runs_exact']}/{s['runs']} runs exact over {s['cases']} cases; max energy error "
          f"{s['max_energy_rel_err']:.2e}; no split form: {', '.join(s['without_split_form']) or 'none'}")
    return 0 if s["runs_exact"] == s["runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
