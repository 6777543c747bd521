"""accel-tune run: load a packed plan and run one inference on the simulated device; print the
outputs' shapes and the simulated latency breakdown (host, link, launch, device, per external
function), beside what the plan predicted."""
from __future__ import annotations

import argparse
import io
import os
import zipfile

import numpy as np

from tuner.cli import CLIError, print_json
from tuner.cli.common import check_writable
from tuner.cli.progress import Steps, add_progress_arg


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("run", help="run a packed plan on the simulated device",
                       description="Load a packed plan (accel-tune tune -o PLAN), run one inference: host ops "
                                   "with numpy, external functions on the simulated accelerator (numerics by "
                                   "the reference implementation, timing by the simulator with the plan's "
                                   "schedules and hardware). Prints output shapes and the latency breakdown.")
    p.add_argument("plan", metavar="PLAN", help="packed plan (zip archive), or an ONNX file written by accel-tune export")
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="inputs by name (default: deterministic random inputs of the right shapes; token "
                        "ids within the vocabulary, masks all ones)")
    p.add_argument("--seed", type=int, default=0, metavar="S", help="seed of the default random inputs")
    p.add_argument("-o", "--output", metavar="OUT.npz", help="write the outputs here, by name")
    p.add_argument("--fidelity", choices=("tile", "analytical"), default="tile",
                   help="kernel simulator for device timing (default: tile, what the tuner measures)")
    p.add_argument("--max-ops", type=int, default=None, metavar="N",
                   help="stop a run that executes more than N host ops and device calls (default 200,000, "
                        "about 20 s; a Loop's trip count is data in the plan)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    add_progress_arg(p)
    return p


def read_inputs(path: str) -> dict[str, np.ndarray]:
    """Arrays of an .npz by key, read as untrusted input (``partition.packed.load_npz``: size caps,
    each .npy header checked against its size before allocation, never unpickled)."""
    from partition.packed import DEFAULT_MAX_TOTAL_BYTES, load_npz
    if not os.path.isfile(path):
        raise CLIError(f"inputs file not found: {path}")
    size = os.path.getsize(path)
    if size > DEFAULT_MAX_TOTAL_BYTES:
        raise CLIError(f"{path}: {size:,} bytes, over the {DEFAULT_MAX_TOTAL_BYTES:,}-byte cap on an inputs file")
    with open(path, "rb") as f:
        data = f.read(size)  # read(n) allocates n bytes up front: ask for the file's size, not the cap
    if data[:6] == b"\x93NUMPY":
        raise CLIError(f"{path}: not an .npz archive of named arrays (got a single .npy array)")
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise CLIError(f"{path}: not a readable .npz file (not a zip archive)")
    return load_npz(data, path)


def run(args) -> int:
    from tuner.cli.cmd_export import packed_plan
    with packed_plan(args.plan) as path:  # an exported .onnx file runs as the plan rebuilt from it
        return _run(args, path)


def _run(args, path: str) -> int:
    from sim.graph.runtime import DEFAULT_MAX_OPS, RunInputError, example_inputs, load

    max_ops = DEFAULT_MAX_OPS if args.max_ops is None else args.max_ops
    if max_ops < 1:
        raise CLIError(f"--max-ops must be >= 1, got {max_ops}")
    if args.output:
        check_writable(args.output, "the outputs")
    with Steps(args, "run", 2) as steps:
        steps.step("loading the plan, simulating its functions")
        mod = load(path, fidelity=args.fidelity)
        if args.inputs:
            inputs, source = read_inputs(args.inputs), args.inputs
        else:
            inputs, source = example_inputs(mod, args.seed), f"random (seed {args.seed})"
        steps.step("running one inference")
        try:
            res = mod.run(inputs, max_ops=max_ops)
        except RunInputError as e:
            raise CLIError(f"{args.inputs}: {e}" if args.inputs else str(e)) from None
    if args.output:
        # Output names are graph value names; npz keys are looked up, never used as paths.
        np.savez(args.output, **{k: np.asarray(v) for k, v in res.outputs.items()})

    pred = mod.manifest.get("predicted", {})
    b = res.breakdown
    if args.json:
        obj = {"plan": args.plan, "model": mod.manifest.get("model", {}).get("name"),
               "hardware": mod.hw.name, "fidelity": mod.fidelity, "inputs": source,
               "outputs": {k: {"shape": list(v.shape), "dtype": v.dtype.name} for k, v in res.outputs.items()},
               "latency_s": res.latency_s, "energy_j": res.energy_j, "breakdown": b.to_dict(),
               "predicted": {"latency_s": pred.get("latency_s"), "energy_j": pred.get("energy_j")}}
        if args.output:
            obj["output_file"] = args.output
        print_json(obj)
        return 0
    _print(mod, res, source, pred, args)
    return 0


def _print(mod, res, source, pred, args) -> None:
    b = res.breakdown
    name = mod.manifest.get("model", {}).get("name", "?")
    print(f"{name} on {mod.hw.name} ({args.plan}), inputs: {source}")
    print("outputs:")
    for k, v in res.outputs.items():
        print(f"  {k}  {v.dtype.name}[{','.join(map(str, v.shape))}]")
    print(f"simulated latency {b.latency_s * 1e3:.3f} ms, energy {b.energy_j * 1e3:.3f} mJ "
          f"({mod.fidelity} kernel simulator)")
    print(f"  host    {b.host_s * 1e3:10.3f} ms  ({b.host_ops} ops and the link's conversions, {b.host_j * 1e3:.3f} mJ)")
    print(f"  link    {b.link_s * 1e3:10.3f} ms")
    from sim.graph.subgraph import RESIDENT_SYMBOL  # its row is transfers, not calls
    calls = sum(f.calls for f in b.functions if f.symbol != RESIDENT_SYMBOL)
    print(f"  launch  {b.launch_s * 1e3:10.3f} ms  ({calls} calls)")
    print(f"  device  {b.device_s * 1e3:10.3f} ms")
    if b.functions:
        w = max(len("function"), *(len(f.symbol) for f in b.functions))
        # device ms is the kernels alone; total ms adds the calls' launches and link transfers.
        print(f"  {'function':<{w}} {'calls':>5} {'cycles':>14} {'device ms':>10} {'total ms':>10} {'energy mJ':>10}")
        for f in b.functions:
            print(f"  {f.symbol:<{w}} {f.calls:>5} {f.cycles:>14,} {f.device_s * 1e3:>10.3f} "
                  f"{f.latency_s * 1e3:>10.3f} {f.energy_j * 1e3:>10.3f}")
    if isinstance(pred.get("latency_s"), (int, float)) and isinstance(pred.get("energy_j"), (int, float)):
        print(f"plan's prediction: latency {pred['latency_s'] * 1e3:.3f} ms, energy "
              f"{pred['energy_j'] * 1e3:.3f} mJ")
    if args.output:
        print(f"outputs written to {args.output}")
