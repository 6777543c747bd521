"""accel-tune hw: list the hardware presets, or show one (or a config file) in full."""
from __future__ import annotations

import argparse

from tuner.cli import print_json


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("hw", help="list hardware presets or show one",
                       description="list: every preset with its array, buffers, DRAM bandwidth and clock. "
                                   "show NAME|FILE: the whole configuration as TOML (it loads back: "
                                   "hw show X > mine.toml, then edit) with its fingerprint.")
    hs = p.add_subparsers(dest="hw_command", metavar="ACTION")
    hs.required = True
    lp = hs.add_parser("list", help="list the presets")
    lp.add_argument("--json", action="store_true", help="print a list of {name, description, fingerprint, ...}")
    sp = hs.add_parser("show", help="show one preset or config file")
    sp.add_argument("name", metavar="NAME|FILE")
    sp.add_argument("--json", action="store_true", help="print the config tree and its fingerprint")
    return p


def _summary(hw) -> dict:
    b = hw.buffers
    return {"name": hw.name, "levels": [lv.name for lv in hw.levels], "description": hw.description, "fingerprint": hw.fingerprint(),
            "array": f"{hw.array.rows}x{hw.array.cols}", "dataflows": list(hw.array.dataflows),
            "mac_dtype": hw.array.mac_dtype, "sram_bytes": b.total_bytes, "unified_buffer": b.unified,
            "dram_bytes_per_cycle": hw.dram.bytes_per_cycle, "clock_mhz": hw.clock.freq_mhz,
            "peak_tmacs": hw.peak_macs_per_s() / 1e12, "area_mm2": hw.area_mm2()}


def run(args) -> int:
    import sim
    if args.hw_command == "list":
        rows = [_summary(sim.load_hw(n)) for n in sim.hw.presets.names()]
        if args.json:
            print_json(rows)
            return 0
        print(f"{'name':<20} {'array':>8} {'dataflows':<10} {'SRAM KiB':>9} {'DRAM B/cyc':>10} {'MHz':>6} {'TMAC/s':>7}  description")
        for r in rows:
            print(f"{r['name']:<20} {r['array']:>8} {','.join(r['dataflows']):<10} {r['sram_bytes'] / 1024:>9.0f} "
                  f"{r['dram_bytes_per_cycle']:>10g} {r['clock_mhz']:>6g} {r['peak_tmacs']:>7.2f}  {r['description']}")
        return 0
    hw = sim.load_hw(args.name)
    if args.json:
        print_json({**hw.to_dict(every_section=True), "fingerprint": hw.fingerprint(), "area_mm2": hw.area_mm2()})
        return 0
    print(toml_text(hw), end="")
    return 0


def hierarchy_text(hw) -> str:
    """The storage hierarchy as TOML comments, outermost first, one line per level (instances,
    capacity, what it keeps, fan-out below); the [[levels]] tables below hold the values."""
    from sim.hw.config_hierarchy import hierarchy_of
    h = hierarchy_of(hw)
    lines = ["# hierarchy (outermost first):"]
    for i, lv in enumerate(h.levels):
        fx, fy = h.fanout(i)
        cap = "unbounded" if lv.capacity_words is None else f"{lv.capacity_words:,} words"
        keeps = ", ".join(sorted(lv.keeps)) if lv.keeps is not None else "all"
        lines.append(f"#   {lv.name:<16} x{lv.instances:<5} {cap:>17} of {lv.word_bits} b, block {lv.block_size}, "
                     f"keeps {keeps}; fans out {fx}x{fy}")
    m = h.arithmetic
    lines.append(f"#   {m.name:<16} x{m.instances:<5} ({m.mesh_x} x {m.mesh_y}), {m.mac_pj:g} pJ per MAC")
    return "\n".join(lines) + "\n"


def toml_text(hw) -> str:
    """The whole config as TOML (what ``hw show`` prints): it loads back as the same machine
    (same fingerprint), so ``accel-tune hw show X > mine.toml`` starts a config to edit. The
    derived figures are TOML comments."""
    import tomli_w

    from sim.hw.config import field_rules, level_rules
    head = (f"# {hw.name}: {hw.description}\n"
            f"# fingerprint {hw.fingerprint()}  area {hw.area_mm2():.2f} mm2  "
            f"peak {hw.peak_macs_per_s() / 1e12:.3f} TMAC/s\n")
    if hw.levels:
        head += hierarchy_text(hw)
    return head + _with_ranges(tomli_w.dumps(hw.to_dict(every_section=True)), {**{p: r.describe() for p, r, _ in field_rules()},
                                                       **{f"levels.{p}": r.describe() for p, r, _ in level_rules()}})


def _with_ranges(text: str, rules: dict[str, str]) -> str:
    """Each field's first line gets its rule as a TOML comment (``rows = 16  # integer 1..4,096
    PEs``); a comment after an array's opening bracket is valid TOML, so the text still loads."""
    out, section = [], ""
    for line in text.splitlines():
        if line.startswith("[") and line.endswith("]"):
            section = line.strip("[]")  # [[levels]]: every level's fields share the levels rules
        key = line.split(" = ", 1)[0] if " = " in line and not line.startswith(" ") else None
        rule = rules.get(f"{section}.{key}") if key else None
        out.append(f"{line}  # {rule}" if rule else line)
    return "\n".join(out) + "\n"
