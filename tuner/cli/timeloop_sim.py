"""``accel-tune simulate --timeloop FILE...``: evaluate a Timeloop architecture + problem + mapping
(+ Accelergy ERT/ART) on the multi-level data-movement model and print Timeloop's statistics:
per storage level (innermost first) and data space the reads, fills and updates (totals over the
utilized instances), cycles and energy. Jinja2 templates among the files (timeloopfe's
``top.yaml.jinja2``) are rendered with ``--timeloop-var KEY=VALUE`` values. ``--json`` prints
the object of issue 12's contract. ``--fidelity tile`` walks the mapping (``sim.cost.walk``): the same
counts, the walk's cycles and the leakage over them, in the same object."""
from __future__ import annotations

from tuner.cli import CLIError, print_json


def template_variables(pairs: list[str]) -> dict[str, str]:
    """``--timeloop-var KEY=VALUE`` as timeloopfe reads ``-j KEY=VALUE``: string values, each key
    once, neither side empty."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        key = key.strip()
        if not sep or not key or not value:
            raise CLIError(f"simulate: --timeloop-var {pair!r} must be KEY=VALUE")
        if not key.isidentifier():
            raise CLIError(f"simulate: --timeloop-var key {key!r} is not a template variable name")
        if key in out:
            raise CLIError(f"simulate: --timeloop-var {key} given twice")
        out[key] = value
    return out


def run_timeloop(args) -> int:
    from sim.timeloop import evaluate, load
    variables = template_variables(args.timeloop_var)
    walked = None
    if getattr(args, "fidelity", "analytical") == "tile":
        from sim.cost.walk import walk
        walked = walk(*load(args.timeloop, variables), check=False)   # load checked the mapping
        ev = walked.evaluation
    else:
        ev = evaluate(args.timeloop, variables)
    js = ev.to_json()
    if args.json:
        print_json(js)
        return 0
    print(f"Timeloop model: {js['computes']:,} computes, {js['cycles']:,} cycles "
          f"({ev.utilized_macs} of the MACs used), energy {js['energy_pj']:,.2f} pJ "
          f"({js['energy_pj'] / max(1, js['computes']):.3f} pJ/compute)")
    if walked is not None:
        loops = " ".join(f"{lv}.{d}{f}" for lv, d, f in walked.walked_loops) or "none"
        print(f"tile-level walk: {walked.steps:,} steps over loops {loops} (blocks of {walked.block_cycles:,} "
              f"cycles); fill {walked.fill_cycles:,.0f} cycles, drain {walked.drain_cycles:,.0f}; the closed "
              f"form: {walked.analytical_cycles:,} cycles")
    print(f"  {'level':<24} {'inst':>9} {'tensor':<12} {'reads':>14} {'fills':>14} {'updates':>14} {'energy pJ':>16}")
    for lv in js["levels"]:
        inst = f"{lv['utilized_instances']}/{lv['instances']}"
        first = True
        for name, c in lv["tensors"].items():
            label = (lv["name"][:24], inst) if first else ("", "")
            energy = f"{lv['energy_pj']:,.2f}" if first else ""
            print(f"  {label[0]:<24} {label[1]:>9} {name[:12]:<12} {c['reads']:>14,} {c['fills']:>14,} "
                  f"{c['updates']:>14,} {energy:>16}")
            first = False
        if first:
            print(f"  {lv['name'][:24]:<24} {inst:>9} {'(keeps nothing)':<12} {'':>14} {'':>14} {'':>14} "
                  f"{lv['energy_pj']:>16,.2f}")
    return 0
