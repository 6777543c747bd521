"""accel-tune models: the built-in models (and ONNX files) with their size and work."""
from __future__ import annotations

import argparse

from tuner.cli import print_json
from tuner.cli.progress import Steps, add_progress_arg


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("models", help="list the built-in models with nodes, parameters and GMACs",
                       description="Build every built-in model (or the ones named) and print its node "
                                   "count (sub-graphs included), parameter count and multiply-accumulates "
                                   "per inference. --onnx adds rows for ONNX files.")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these built-in models")
    p.add_argument("--onnx", action="append", default=[], metavar="FILE", help="also describe this ONNX file")
    p.add_argument("--json", action="store_true",
                   help="print a list of {name, nodes, params, macs, inputs: [{name, shape, dtype}]}")
    p.add_argument("--llm", action="store_true",
                   help="list the built-in decoder LLMs of `accel-tune llm` instead (their hyper-parameters, "
                        "parameter counts and sources)")
    add_progress_arg(p)
    return p


def _row(name: str, graph) -> dict:
    from partition.models import model_stats
    s = model_stats(graph)
    return {"name": name, "nodes": s.nodes, "params": s.params, "macs": s.macs,
            "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in graph.inputs]}


def rows(names: list[str], onnx_files: list[str], steps: Steps | None = None) -> list[dict]:
    """One row per model; ``steps`` (a progress bar) is told each model as it is built (building
    the built-ins, weights included, is what takes seconds)."""
    from partition import models
    from partition.onnx.importer import load_onnx
    infos = [models.info(n) for n in names] if names else ([] if onnx_files else models.list_models())
    out = []
    for m in infos:
        if steps is not None:
            steps.step(m.name)
        out.append(_row(m.name, models.get(m.name)))
    for path in onnx_files:
        if steps is not None:
            steps.step(path)
        out.append(_row(path, load_onnx(path)))
    return out


def llm_rows(names: list[str]) -> list[dict]:
    from partition.llm.config import BUILTINS, builtin
    cfgs = [builtin(n) for n in names] if names else list(BUILTINS.values())
    return [{**c.to_dict(), "params": c.params(), "active_params": c.active_params()} for c in cfgs]


def _run_llm(args) -> int:
    if args.onnx:
        raise ValueError("models --llm lists the built-in decoders; --onnx does not apply")
    table = llm_rows(args.names)
    if args.json:
        print_json(table)
        return 0
    print(f"{'name':<14} {'params':>15} {'layers':>6} {'hidden':>6} {'heads':>5} {'kv':>3} {'ffn':>6} "
          f"{'vocab':>7}  mlp          positions  source")
    for r in table:
        moe = f" x{r['experts']} top-{r['experts_per_token']}" if r["experts"] > 1 else ""
        print(f"{r['name']:<14} {r['params']:>15,} {r['layers']:>6} {r['hidden']:>6} {r['heads']:>5} "
              f"{r['kv_heads']:>3} {r['ffn']:>6} {r['vocab']:>7}  {r['activation'] + moe:<12} "
              f"{r['positions']:<9}  {r['source']}")
    return 0


def run(args) -> int:
    if getattr(args, "llm", False):
        return _run_llm(args)
    from partition import models
    n = (len(args.names) if args.names else (0 if args.onnx else len(models.list_models()))) + len(args.onnx)
    with Steps(args, "building models", n) as steps:
        table = rows(args.names, args.onnx, steps)
    if args.json:
        print_json(table)
        return 0
    width = max([4] + [len(r["name"]) for r in table])
    print(f"{'name':<{width}}  {'nodes':>6}  {'params':>12}  {'GMACs':>8}  inputs")
    for r in table:
        ins = ", ".join(f"{i['name']} {i['dtype']}[{','.join(map(str, i['shape']))}]" for i in r["inputs"])
        print(f"{r['name']:<{width}}  {r['nodes']:>6}  {r['params']:>12,}  {r['macs'] / 1e9:>8.3f}  {ins}")
    return 0
