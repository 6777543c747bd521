"""accel-tune export: a packed plan as one ONNX model that stock onnxruntime runs, every offloaded
region one call of a model-local function in the domain ``accel_tune.<target>`` carrying the
plan's facts in ``metadata_props`` (``partition.onnx.export``, docs/FORMAT.md section 10).

``packed_plan(path)`` is how ``run`` and ``inspect`` read such a file: the packed plan rebuilt
from it in a temporary folder."""
from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from typing import Iterator

from tuner.cli import CLIError, print_json
from tuner.cli.common import check_writable


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("export", help="write a packed plan as an ONNX model (regions as ONNX functions)",
                       description="Write a packed plan (accel-tune tune -o PLAN) as one ONNX model that "
                                   "onnxruntime runs with its CPU provider alone: the host part in standard "
                                   "ops, every offloaded region one node calling a model-local function in "
                                   "the domain accel_tune.<target>, whose body is the region in standard ops "
                                   "and whose metadata_props carry the plan's facts (symbol, predicted cycles "
                                   "and energy, schedules, hardware fingerprint). accel-tune inspect/run read "
                                   "the file back.")
    p.add_argument("plan", metavar="PLAN", help="packed plan (zip archive)")
    p.add_argument("-o", "--output", metavar="FILE.onnx", required=True, help="the ONNX file to write")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    return p


def _fingerprint(manifest) -> str:
    """The plan's hardware as a valid config (what run and inspect require), and its fingerprint."""
    import sim
    hw = manifest.get("hardware")
    if not isinstance(hw, dict) or "base" in hw:
        raise CLIError("manifest.json: hardware must be a complete config object")
    try:
        return sim.HardwareConfig.from_dict(hw, complete=True).fingerprint()
    except (sim.HardwareError, TypeError, ValueError) as e:
        raise CLIError(f"manifest.json: hardware is not a valid hardware config: {e}") from None


def run(args) -> int:
    from partition import read_packed
    from partition.onnx.export import OPSET, target_domain, write_onnx

    check_writable(args.output, "the ONNX file")
    mod = read_packed(args.plan)
    fp = _fingerprint(mod.manifest)
    m = write_onnx(mod, args.output, hardware_fingerprint=fp)
    pred = mod.manifest.get("predicted", {}).get("functions", {})
    regions = []
    for f in m.functions:
        facts = {p.key: p.value for p in f.metadata_props}
        regions.append({"symbol": f.name, "domain": f.domain, "nodes": len(f.node),
                        "calls": sum(1 for n in _all_nodes(m.graph) if n.op_type == f.name and n.domain == f.domain),
                        "cycles": pred.get(f.name, {}).get("cycles"),
                        "energy_j": pred.get(f.name, {}).get("energy_j"),
                        "kernels": len(mod.externals[f.name].get("schedules", {})),
                        "hardware_fingerprint": facts.get("accel_tune.hardware_fingerprint")})
    obj = {"plan": args.plan, "output": args.output, "opset": OPSET, "ir_version": m.ir_version,
           "model": mod.manifest.get("model", {}).get("name"), "hardware": mod.manifest["hardware"].get("name"),
           "hardware_fingerprint": fp, "host_nodes": len(m.graph.node),
           "domains": sorted({target_domain(f.attrs.get("Compiler", "device"))
                              for f in (mod.function(s) for s in mod.externals)}),
           "regions": regions, "bytes": os.path.getsize(args.output)}
    if args.json:
        print_json(obj)
        return 0
    print(f"{args.output}: ONNX opset {OPSET}, IR {m.ir_version}, {obj['bytes']:,} bytes, "
          f"{len(regions)} region function(s), {len(m.graph.node)} host node(s)")
    print(f"model {obj['model']} on {obj['hardware']} (hardware fingerprint {fp})")
    for r in regions:
        cyc = f"{r['cycles']:,} cycles" if isinstance(r["cycles"], int) else "cycles n/a"
        print(f"  {r['domain']}.{r['symbol']}  calls={r['calls']}  kernels={r['kernels']}  body nodes={r['nodes']}  {cyc}")
    return 0


def _all_nodes(g):
    for n in g.node:
        yield n
        for a in n.attribute:
            for sg in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _all_nodes(sg)


def is_onnx_path(path: str) -> bool:
    return str(path).lower().endswith(".onnx")


@contextlib.contextmanager
def packed_plan(path: str) -> Iterator[str]:
    """``path`` itself for a packed plan; for an exported ``.onnx`` file, the packed plan rebuilt
    from it (metadata and weights) in a temporary folder, removed afterwards."""
    if not is_onnx_path(path):
        yield path
        return
    from partition.onnx.export import packed_from_onnx
    with tempfile.TemporaryDirectory(prefix="accel-tune-onnx-") as tmp:
        dst = os.path.join(tmp, os.path.basename(path)[:-5] + ".plan.zip")
        packed_from_onnx(path, dst)
        yield dst
