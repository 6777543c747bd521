"""Fuzz family "hw": hardware config files through ``accel-tune hw show`` and ``simulate``.

Each case is one file built from the case's seed: numbers at and beyond every field's range edge
(inf, nan, huge, negative, strings, lists), several fields at once (with the cross-field buffer
rule), text and list fields, and file-level faults (base chains and cycles, YAML aliases, binary
and oversized files, devices, deep nesting, unknown keys). The case knows whether its file is a
valid machine: a valid one must load (and its derived figures and simulated latency and energy be
finite), an invalid one must end in one error line.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

import sim
from fuzzgen import FORMATS, Case, bad_value, choose, finite, in_range, ok_value, write
from sim.hw.configfile import MAX_CONFIG_BYTES
from sim.hw.config import MAX_BASE_DEPTH, field_rules

FAMILY = "hw"
RULES = {p: r for p, r, _ in field_rules()}
NUMERIC = sorted(p for p, r in RULES.items() if r.kind in ("int", "num"))
PRESETS = sim.hw.presets.names()
MODEL = "ssd_detector"  # convolutions, pooling and a head: small (0.06 GMACs), offloads on every preset


def _check_show(out) -> None:
    d = json.loads(out.out)
    assert finite(d["area_mm2"]) and len(d["fingerprint"]) == 64, d
    for path, rule in RULES.items():
        if rule.kind in ("int", "num"):
            sec, f = path.split(".")
            assert rule.lo <= d[sec][f] <= rule.hi, (path, d[sec][f])


def _check_simulate(out) -> None:
    d = json.loads(out.out)
    assert finite(d["latency_s"], positive=True) and finite(d["energy_j"]), d
    for k in ("host_s", "link_s", "launch_s", "device_s", "host_j"):
        assert finite(d[k]), (k, d[k])
    assert abs(d["host_s"] + d["link_s"] + d["launch_s"] + d["device_s"] - d["latency_s"]) <= 1e-9 * d["latency_s"]


def _valid_buffers(values: dict) -> bool:
    """The one cross-field rule: without a unified buffer, every per-operand buffer is > 0."""
    b = values["buffers"]
    return b["unified_bytes"] != 0 or all(b[k] > 0 for k in ("ifmap_bytes", "weight_bytes", "output_bytes"))


def _valid_levels(values: dict) -> bool:
    """A hierarchical preset's fan-outs must still reach the array: the fixed fan-outs of each axis
    divide the array's side (one level per axis takes the rest, fan-out 0) or equal it."""
    for axis, side in (("fanout_x", int(values["array"]["cols"])), ("fanout_y", int(values["array"]["rows"]))):
        given = [lv[axis] for lv in values.get("levels", [])]
        if not given:
            continue
        fixed = math.prod(g for g in given if g)
        if (side % fixed if 0 in given else side != fixed):
            return False
    return True


def _numbers(rng, tmp: Path, n_fields: int) -> list[Case]:
    preset = choose(rng, PRESETS)
    full = sim.load_hw(preset).to_dict(every_section=True)
    doc: dict = {"base": preset}
    valid = True
    for path in rng.choice(NUMERIC, size=n_fields, replace=False):
        sec, f = path.split(".")
        v = ok_value(rng, RULES[path]) if rng.random() < 0.6 else bad_value(rng, RULES[path])
        doc.setdefault(sec, {})[f] = v
        full[sec][f] = v
        valid &= in_range(RULES[path], v)
    valid = valid and _valid_buffers(full) and _valid_levels(full)
    p = write(tmp / "hw", doc, choose(rng, FORMATS))
    label = f"{n_fields} field(s) over {preset}: " + json.dumps({k: v for k, v in doc.items() if k != "base"},
                                                                default=str)[:160]
    cases = [Case(label, ["hw", "show", str(p), "--json"], "ok" if valid else "error", _check_show)]
    if valid and rng.random() < 0.5:
        # A valid machine may still fit no tile of a layer (tiny buffers): then one error line.
        cases.append(Case(label + " | simulate", ["simulate", "--model", MODEL, "--hw", str(p), "--json"], "any",
                          _check_simulate))
    return cases


TEXT = [
    ("name", "a\nb", False), ("name", "x" * 201, False), ("name", "", False), ("name", 7, False),
    ("name", "ok name", True), ("description", "\x00", False), ("description", "y" * 2001, False),
    ("support.target", "../evil", False), ("support.target", "a/b", False), ("support.target", "t" * 65, False),
    ("support.target", "npu.v2-x", True), ("support.ops", ["conv2d", "conv2d"], False),
    ("support.ops", ["conv2d", "lstm"], False), ("support.ops", "conv2d", False), ("support.ops", [], True),
    ("support.patterns", [1, 2], False), ("vector.ops", [f"op{i}" for i in range(1001)], False),
    ("vector.ops", ["relu", ""], False), ("vector.ops", ["relu", "reluu"], False), ("vector.ops", ["gelu"], True),
    ("support.patterns", ["conv2d_bias_relux"], False), ("support.patterns", ["dense_bias_gelu"], True), ("array.dataflows", [], False), ("array.dataflows", ["rs"], False),
    ("array.dataflows", ["os"], True), ("array.mac_dtype", "int3", False), ("array.mac_dtype", "bf16", True),
    ("array.fold_overlap", "yes", False), ("array.fold_overlap", False, True),
    ("interconnect.protocols", [["LL", 6.6e-6, 0.6e-6, 0.2], ["Simple", 8.4e-6, 3.4e-6, 1]], True),
    ("interconnect.protocols", [], True), ("interconnect.protocols", [["LL", -1e-6, 0, 0.2]], False),
    ("interconnect.protocols", [["LL", 0, 0, 1.5]], False), ("interconnect.protocols", [["LL", 0, 0]], False),
    ("interconnect.protocols", "LL", False), ("interconnect.protocols", [["A", 0, 0, 1]] * 9, False),
    ("interconnect.protocols", [["A b", 0, 0, 1]], False), ("interconnect.protocols", [[1, 2, 3, 4]], False),
    ("interconnect.protocols", [["A", "0", 0, 1]], False), ("interconnect.protocols", [["A", 0, 0, 1]] * 2, False),
    ("kernels.classes", [["layer_norm", 0.8, 3.5e-5], ["elementwise", 1, 0]], True), ("kernels.classes", [], True),
    ("kernels.classes", [["gemm", 0.8, 0]], False), ("kernels.classes", [["softmax", 0, 0]], False),
    ("kernels.classes", [["softmax", 0.5, -1e-6]], False), ("kernels.classes", [["softmax", 0.5, 1.0]], False),
    ("kernels.classes", [["softmax", 0.5]], False), ("kernels.classes", "softmax", False),
    ("kernels.classes", [["softmax", "0.5", 0]], False), ("kernels.classes", [["softmax", 0.5, 0]] * 2, False),
]


def _text(rng, tmp: Path) -> list[Case]:
    path, v, valid = TEXT[int(rng.integers(len(TEXT)))]
    doc: dict = {"base": choose(rng, PRESETS)}
    if "." in path:
        sec, f = path.split(".")
        doc[sec] = {f: v}
    else:
        doc[path] = v
    p = write(tmp / "hw", doc, choose(rng, FORMATS))
    return [Case(f"{path} = {str(v)[:40]!r}", ["hw", "show", str(p), "--json"], "ok" if valid else "error",
                 _check_show)]


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def _file(rng, tmp: Path) -> list[Case]:
    """File-level faults; each returns (label, path, expect)."""
    kind = int(rng.integers(22))
    preset = choose(rng, PRESETS)
    p = tmp / "hw.toml"
    expect = "error"
    if kind == 0:
        p.write_text('base = "hw.toml"\n')
        label = "base names the file itself"
    elif kind == 1:
        n = int(rng.integers(2, 6))
        names = [f"c{i}.{choose(rng, FORMATS)}" for i in range(n)]
        for i, name in enumerate(names):
            (tmp / name).write_text(_base_line(name, names[(i + 1) % n]))
        p = tmp / names[0]
        label = f"cycle of {n} files"
    elif kind == 2:
        # the chain is about depth: each file sets array.rows, which a hierarchy's fixed fan-outs may
        # not divide, so it starts from a one-level preset
        preset = choose(rng, [q for q in PRESETS if not sim.load_hw(q).levels])
        n = int(rng.integers(1, MAX_BASE_DEPTH + 4))
        for i in range(n):
            nxt = f"d{i + 1}.toml" if i < n - 1 else preset
            (tmp / f"d{i}.toml").write_text(f'base = "{nxt}"\n[array]\nrows = {i + 1}\n')
        p = tmp / "d0.toml"
        expect = "ok" if n < MAX_BASE_DEPTH else "error"
        label = f"chain of {n} files"
    elif kind == 3:
        p.write_text('base = "nowhere/missing.toml"\n')
        label = "base file missing"
    elif kind == 4:
        p.write_text("base = " + choose(rng, ["1", "[1]", "true", "{a = 1}", '""']) + "\n")
        label = "base not a name"
    elif kind == 5:
        p = tmp / "hw.yaml"
        p.write_text(f"base: {preset}\n" + _bomb(int(rng.integers(2, 10))))
        label = "YAML alias bomb"
    elif kind == 6:
        p = tmp / "hw.yaml"
        p.write_text(f"base: {preset}\narray: &a {{rows: 8}}\n" + choose(rng, ["", "buffers: *a\n"]))
        label = "YAML anchor"
    elif kind == 7:
        p = tmp / f"hw.{choose(rng, FORMATS)}"
        p.write_bytes(rng.integers(0, 256, size=int(rng.integers(1, 4096)), dtype=np.uint8).tobytes())
        label = "random bytes"
    elif kind == 8:
        p.write_bytes(f'base = "{preset}"\n'.encode() + b"\xff\xfe\x00\x01")
        label = "invalid UTF-8 and NUL"
    elif kind == 9:
        with open(p, "w") as f:
            f.write(f'base = "{preset}"\n')
            f.write("# pad\n" * (MAX_CONFIG_BYTES // 6 + 1))
        label = "over the size cap"
    elif kind == 10:
        p.symlink_to("/dev/zero")
        label = "symlink to /dev/zero"
    elif kind == 11:
        os.mkfifo(p)
        label = "FIFO"
    elif kind == 12:
        p.mkdir()
        label = "a folder"
    elif kind == 13:
        fmt = choose(rng, FORMATS)
        depth = int(rng.integers(500, 100_000))
        p = tmp / f"hw.{fmt}"
        p.write_text(("a = " if fmt == "toml" else "") + "[" * depth + "]" * depth)
        label = f"nested {depth} deep ({fmt})"
    elif kind == 14:
        sec = choose(rng, ["array", "arrays", "clock", "zzz"])
        p = write(tmp / "hw", {"base": preset, sec: {"rowz": 3}}, choose(rng, FORMATS))
        label = f"unknown key in {sec}"
    elif kind == 15:
        p = tmp / choose(rng, ["hw.txt", "hw", "hw.TOML.bak", "hw.ini"])
        p.write_text(f'base = "{preset}"\n')
        label = "unknown suffix"
    elif kind == 16:
        p = tmp / f"hw.{choose(rng, FORMATS)}"
        p.write_text(choose(rng, ["", "   \n", "{}" if p.suffix == ".json" else ""]))
        label = "empty file"
    elif kind == 17:
        p = tmp / choose(rng, ["hw.json", "hw.yaml"])
        p.write_text(choose(rng, ["[1, 2]", '"text"', "42", "null"]))
        label = "not a table"
    elif kind == 18:
        p = tmp / "hw.json"
        p.write_text('{"base": "%s", "array": {"rows": %s}}' % (preset, "9" * int(rng.integers(20, 6000))))
        label = "integer of many digits"
    elif kind == 19:
        p = tmp / "hw.yaml"
        p.write_text(choose(rng, ["!!python/object/apply:os.system ['true']\n", "a: !!binary AAAA\n",
                                  "? [a, b]\n: 1\n", "a: 1\na: 2\n"]))
        label = "YAML tags and odd keys"
    elif kind == 20:
        p.write_text(f'base = "{preset}"\n[array]\nrows = 8\nrows = 9\n')
        label = "duplicate TOML key"
    else:
        # a valid file written in every format, with a base file beside it in another format
        base = write(tmp / "basefile", {"base": preset, "clock": {"freq_mhz": 321.0}}, choose(rng, FORMATS))
        p = write(tmp / "hw", {"base": base.name, "array": {"rows": 24}}, choose(rng, FORMATS))
        full = sim.load_hw(preset).to_dict(every_section=True)
        full["array"]["rows"] = 24
        # 24 rows are valid unless the preset's levels fix fan-outs that do not divide them (a GPU's SMs)
        expect = "ok" if _valid_levels(full) else "error"
        label = "valid base file beside it"
    return [Case(f"file: {label}", ["hw", "show", str(p), "--json"], expect, _check_show)]


def _base_line(name: str, base: str) -> str:
    if name.endswith(".toml"):
        return f'base = "{base}"\n'
    if name.endswith(".json"):
        return json.dumps({"base": base})
    return f"base: {base}\n"


def make_cases(seed: int, tmp: Path) -> list[Case]:
    rng = np.random.default_rng(seed)
    kind = rng.random()
    if kind < 0.35:
        return _numbers(rng, tmp, 1)
    if kind < 0.55:
        return _numbers(rng, tmp, int(rng.integers(2, 9)))
    if kind < 0.7:
        return _text(rng, tmp)
    return _file(rng, tmp)


def test_fuzz_hw(fuzz_case, fuzz_seed, cli, fuzz_check, tmp_path):
    for case in make_cases(fuzz_seed + fuzz_case, tmp_path):
        out = fuzz_check(FAMILY, case.label, cli(case.argv))
        assert case.expect in ("any", out.kind), f"{case.label}: expected {case.expect}, got {out.kind}: {out.err}"
        if out.kind == "ok" and case.check is not None:
            case.check(out)
