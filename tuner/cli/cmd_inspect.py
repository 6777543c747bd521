"""accel-tune inspect: what a packed plan holds, without running it: the partition (host ops,
external functions and their call sites), each external function's kernels with their schedules,
and the costs the plan predicted. ``--dot`` draws the host graph in Graphviz DOT, host ops as
rounded blue boxes, external function calls as orange 3-D boxes, control flow as hexagons with
their bodies in dashed clusters."""
from __future__ import annotations

import argparse
from collections import Counter
from typing import Any, Mapping

from tuner.cli import print_json

HOST_STYLE = 'shape=box, style="rounded,filled", fillcolor="#dbe9f6", color="#4a7ab5"'
EXTERNAL_STYLE = 'shape=box3d, style=filled, fillcolor="#f8c471", color="#b9770e", penwidth=2'
CONTROL_STYLE = 'shape=hexagon, style=filled, fillcolor="#d5f5e3", color="#1e8449"'
HOST_FN_STYLE = 'shape=component, style=filled, fillcolor="#dbe9f6", color="#4a7ab5"'
IO_STYLE = 'style=filled, fillcolor="#eeeeee", color="#777777"'


def add_parser(sub) -> argparse.ArgumentParser:
    p = sub.add_parser("inspect", help="show a packed plan: partition, kernels, schedules, predicted costs",
                       description="Read a packed plan (verifying it) and show its partition summary, every "
                                   "external function's kernels and schedules, and the predicted costs. "
                                   "--dot writes the host graph as Graphviz DOT (host ops and external "
                                   "functions drawn differently), e.g. accel-tune inspect plan.zip --dot | "
                                   "dot -Tsvg > plan.svg")
    p.add_argument("plan", metavar="PLAN", help="packed plan (zip archive), or an ONNX file written by accel-tune export")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print one JSON object")
    fmt.add_argument("--dot", action="store_true", help="write Graphviz DOT of the host graph to stdout")
    return p


def run(args) -> int:
    from partition import read_packed
    from sim.graph.runtime import hardware_of, schedules_of
    from tuner.cli.cmd_export import packed_plan

    with packed_plan(args.plan) as path:  # an exported .onnx file: the plan rebuilt from its metadata
        mod = read_packed(path)
    # What run refuses, inspect refuses too: a plan is for one valid machine (an empty or partial
    # hardware object is not one), and its schedules are complete.
    hardware_of(mod.manifest)
    for sym, doc in mod.externals.items():
        schedules_of(doc.get("schedules", {}), mod.manifest["externals"][sym])
    summary = describe(mod, args.plan)
    if args.dot:
        print(to_dot(mod, summary), end="")
    elif args.json:
        print_json(summary)
    else:
        _print(summary)
    return 0


# ------------------------------------------------------------------------------------- summary
def describe(mod: Any, path: str) -> dict[str, Any]:
    """A JSON-able description of a PackedModule (``partition.read_packed``)."""
    m = mod.manifest
    g = mod.host_graph
    ext = {s: mod.function(s) for s in mod.externals}
    host_ops: Counter = Counter()
    call_sites: Counter = Counter()
    _walk_host(g, ext, {}, host_ops, call_sites)
    pred = m.get("predicted", {})
    hw = m.get("hardware", {}) if isinstance(m.get("hardware"), Mapping) else {}
    dev = _device_config(hw, path)
    device_param_bytes = sum(_const_bytes(fn.graph, dev) for fn in ext.values())
    functions = {s: _describe_function(s, fn, mod.externals[s], pred.get("functions", {}).get(s, {}),
                                       call_sites[s], dev) for s, fn in ext.items()}
    out = {
        "plan": path,
        "format_version": m.get("format_version"),
        "producer": f"{m.get('producer')} {m.get('producer_version')}",
        "model": m.get("model", {}),
        "hardware": hw.get("name"),
        "objective": m.get("objective"),
        "partition": {
            "host_ops": sum(host_ops.values()),
            "host_ops_by_op": dict(sorted(host_ops.items(), key=lambda kv: (-kv[1], kv[0]))),
            "external_functions": len(ext),
            "call_sites": sum(call_sites.values()),
            "offloaded_ops": sum(f["ops"] for f in functions.values()),
            "kernels": sum(len(f["kernels"]) for f in functions.values()),
            "params": len(mod.params),
            "param_bytes": int(sum(a.nbytes for a in mod.params.values())),
            "device_param_bytes": device_param_bytes,
        },
        "predicted": {k: pred.get(k) for k in ("latency_s", "energy_j", "breakdown") if k in pred},
        "functions": functions,
    }
    if "target" in m:
        out["target"] = m["target"]
    if isinstance(m.get("baselines"), Mapping):
        out["baselines"] = {k: v for k, v in m["baselines"].items() if isinstance(v, Mapping)}
    return out


def _walk_host(g, ext: Mapping, scope: Mapping, host_ops: Counter, call_sites: Counter) -> None:
    """Count host ops and external call sites, into If/Loop bodies and host-side functions."""
    scope = {**scope, **g.functions}
    for n in g.nodes:
        if n.op == "call":
            sym = n.attrs.get("callee")
            fn = scope.get(sym)
            if sym in ext and fn is ext[sym]:
                call_sites[sym] += 1
                continue
            if fn is not None:
                _walk_host(fn.graph, ext, scope, host_ops, call_sites)
                continue
        host_ops[n.op] += 1
        for sg in n.subgraphs():
            _walk_host(sg, ext, scope, host_ops, call_sites)


def _device_config(hw_doc: Mapping, path: str):
    """The plan's hardware config: weights on the device are counted in its format."""
    from sim import HardwareConfig
    try:
        return HardwareConfig.from_dict({k: v for k, v in hw_doc.items() if k != "base"})
    except (ValueError, TypeError) as e:
        raise ValueError(f"{path}: manifest.json: hardware is not a valid hardware config: {e}") from None


def _const_bytes(g, hw) -> int:
    """Weights as the device stores them (``sim.graph.transfer``: converted once, at load time)."""
    from sim.graph.transfer import array_device_bytes
    return int(sum(array_device_bytes(c.data, hw) for c in g.constants)
               + sum(_const_bytes(f.graph, hw) for f in g.functions.values()))


def _describe_function(sym: str, fn: Any, doc: Mapping, pred: Mapping, sites: int, hw) -> dict[str, Any]:
    from sim.graph.subgraph import kernel_workload

    body = fn.graph
    # `predicted` and `buffer_plan` are accel-tune's optional, producer-defined fields (FORMAT.md 4):
    # shown when they have the documented shape, skipped when they do not.
    kp = doc.get("predicted")
    kpred = kp.get("kernels") if isinstance(kp, Mapping) and isinstance(kp.get("kernels"), Mapping) else {}
    kernels = []
    n_ops = 0
    for node in body.nodes:
        callee = body.functions.get(node.attrs.get("callee")) if node.op == "call" else None
        ops = [n.op for n in callee.graph.nodes] if callee is not None else [node.op]
        n_ops += len(ops)
        try:
            wl = kernel_workload(node, body.functions).key
        except ValueError:
            wl = None
        k = {"name": node.name,
             "kernel": str(callee.attrs.get("Composite", node.attrs.get("callee"))) if callee is not None else node.op,
             "ops": ops, "workload": wl, "schedule": doc.get("schedules", {}).get(node.name)}
        if isinstance(kpred.get(node.name), Mapping):
            k["predicted"] = dict(kpred[node.name])
        kernels.append(k)
    bp = doc.get("buffer_plan", {})
    where = Counter(v["where"] for v in bp.values()
                    if isinstance(v, Mapping) and v.get("kind") == "intermediate" and isinstance(v.get("where"), str))
    return {
        "compiler": fn.attrs.get("Compiler"),
        "call_sites": sites,
        "inputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in body.inputs],
        "outputs": [{"name": v.name, "shape": list(v.shape), "dtype": v.dtype} for v in body.outputs],
        "ops": n_ops,
        "weight_bytes": _const_bytes(body, hw),
        "intermediates": {"on_chip": where.get("sram", 0), "spilled": where.get("dram", 0)},
        "predicted": dict(pred),
        "kernels": kernels,
        "codegen": doc.get("codegen", {}),
    }


def _fmt_s(x) -> str:
    return f"{x * 1e3:.3f} ms" if isinstance(x, (int, float)) else "-"


def _fmt_j(x) -> str:
    return f"{x * 1e3:.3f} mJ" if isinstance(x, (int, float)) else "-"


def _schedule_text(s: Mapping | None) -> str:
    if not s:
        return "default schedule"
    tiles = f"tiles m{s.get('tile_m')} n{s.get('tile_n')} k{s.get('tile_k')}"
    sp = "x".join(s.get("spatial", []))
    db = ", double-buffered" if s.get("double_buffer") else ""
    return f"{s.get('dataflow')} ({sp}), {tiles}, order {s.get('loop_order')}{db}"


def _print(s: dict) -> None:
    p = s["partition"]
    print(f"{s['plan']}: format {s['format_version']}, produced by {s['producer']}")
    print(f"model {s['model'].get('name')} on {s['hardware']}, objective {s['objective']}")
    print(f"partition: {p['host_ops']} host op(s), {p['external_functions']} external function(s) "
          f"called from {p['call_sites']} site(s), {p['offloaded_ops']} op(s) offloaded in {p['kernels']} kernel(s)")
    top = ", ".join(f"{op} {n}" for op, n in list(p["host_ops_by_op"].items())[:8])
    if top:
        print(f"  host ops: {top}{', ...' if len(p['host_ops_by_op']) > 8 else ''}")
    print(f"  params: {p['params']} array(s), {p['param_bytes']:,} bytes ({p['device_param_bytes']:,} on the device)")
    pr = s["predicted"]
    print(f"predicted: latency {_fmt_s(pr.get('latency_s'))}, energy {_fmt_j(pr.get('energy_j'))}")
    b = pr.get("breakdown")
    if isinstance(b, Mapping):
        print("  " + "  ".join(f"{k[:-2]} {_fmt_s(b.get(k))}" for k in ("host_s", "link_s", "launch_s", "device_s")))
    for k, v in (s.get("baselines") or {}).items():
        print(f"  baseline {k}: latency {_fmt_s(v.get('latency_s'))}, energy {_fmt_j(v.get('energy_j'))}")
    for sym, f in s["functions"].items():
        fp = f["predicted"]
        cyc = f", {fp['cycles']:,} cycles" if isinstance(fp.get("cycles"), int) else ""
        print(f"@{sym} [{f['compiler']}]: {len(f['kernels'])} kernel(s), {f['ops']} op(s), "
              f"{f['call_sites']} call site(s), weights {f['weight_bytes']:,} B; predicted per call "
              f"{_fmt_s(fp.get('latency_s'))}, {_fmt_j(fp.get('energy_j'))}{cyc}")
        ins = ", ".join(f"{v['dtype']}[{','.join(map(str, v['shape']))}]" for v in f["inputs"])
        outs = ", ".join(f"{v['dtype']}[{','.join(map(str, v['shape']))}]" for v in f["outputs"])
        print(f"  in: {ins or '-'}  out: {outs or '-'}")
        for k in f["kernels"]:
            kp = k.get("predicted", {})
            extra = f"  {kp['cycles']:,} cycles" if isinstance(kp.get("cycles"), int) else ""
            print(f"  {k['name']}: {k['kernel']} ({', '.join(k['ops'])}){extra}")
            print(f"      {_schedule_text(k['schedule'])}")


# ------------------------------------------------------------------------------------- DOT
def _q(s: Any) -> str:
    """A DOT double-quoted string; newlines become DOT's centred line break."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _lines(*parts: str) -> str:
    return "\n".join(parts)


def _shape(v) -> str:
    return f"{v.dtype}[{','.join(map(str, v.shape))}]"


def to_dot(mod: Any, summary: Mapping | None = None) -> str:
    """Graphviz DOT of the host graph of a PackedModule."""
    summary = summary or describe(mod, "")
    g = mod.host_graph
    ext = {s: mod.function(s) for s in mod.externals}
    p = summary["partition"]
    title = (f"{summary['model'].get('name', g.name)} on {summary.get('hardware')}: {p['host_ops']} host op(s) "
             f"(blue boxes), {p['call_sites']} call(s) of {p['external_functions']} external function(s) "
             f"(orange 3-D boxes)")
    lines = [f"digraph {_q(g.name)} {{",
             f"  graph [rankdir=TB, fontname=\"Helvetica\", labelloc=t, label={_q(title)}];",
             "  node [fontname=\"Helvetica\", fontsize=10];",
             "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#555555\"];"]
    counter = [0]

    def fresh() -> str:
        counter[0] += 1
        return f"n{counter[0]}"

    def emit(graph, scope: Mapping, indent: str) -> tuple[list[str], list[str]]:
        """Draw ``graph``; return the DOT ids of its input and output nodes."""
        scope = {**scope, **graph.functions}
        src: dict[int, str] = {}
        in_ids = []
        for v in graph.inputs:
            i = fresh()
            lines.append(f"{indent}{i} [label={_q(_lines(v.name, _shape(v)))}, shape=invhouse, {IO_STYLE}];")
            src[id(v)] = i
            in_ids.append(i)
        for n in graph.nodes:
            i = fresh()
            sym = n.attrs.get("callee") if n.op == "call" else None
            fn = scope.get(sym) if sym is not None else None
            if sym in ext and fn is ext[sym]:
                f = summary["functions"][sym]
                kinds = Counter(k["kernel"].split(".")[-1] for k in f["kernels"])
                ks = ", ".join(f"{k} x{c}" if c > 1 else k for k, c in kinds.items())
                cyc = f["predicted"].get("cycles")
                label = _lines(f"@{sym}", f"{len(f['kernels'])} kernel(s): {ks}",
                               *([f"{cyc:,} cycles"] if isinstance(cyc, int) else []))
                lines.append(f"{indent}{i} [label={_q(label)}, {EXTERNAL_STYLE}];")
            elif fn is not None:
                lines.append(f"{indent}{i} [label={_q(_lines(f'@{sym} (on host)', n.name))}, {HOST_FN_STYLE}];")
            elif n.op in ("if", "loop"):
                lines.append(f"{indent}{i} [label={_q(_lines(n.op, n.name))}, {CONTROL_STYLE}];")
            else:
                lines.append(f"{indent}{i} [label={_q(_lines(n.op, n.name))}, {HOST_STYLE}];")
            for v in n.inputs:
                if id(v) in src:  # constants (weights) are not drawn
                    lines.append(f"{indent}{src[id(v)]} -> {i} [label={_q(_shape(v))}];")
            for o in n.outputs:
                src[id(o)] = i
            for attr, sg in _bodies(n):
                c = fresh()
                lines.append(f"{indent}subgraph cluster_{c} {{")
                lines.append(f"{indent}  graph [label={_q(f'{n.name}.{attr}')}, style=dashed, color=\"#1e8449\"];")
                b_in, b_out = emit(sg, scope, indent + "  ")
                lines.append(f"{indent}}}")
                for b in b_in:
                    lines.append(f"{indent}{i} -> {b} [style=dashed, color=\"#1e8449\"];")
                for b in b_out:
                    lines.append(f"{indent}{b} -> {i} [style=dashed, color=\"#1e8449\", constraint=false];")
        out_ids = []
        for k, v in enumerate(graph.outputs):
            o = fresh()
            lines.append(f"{indent}{o} [label={_q(_lines(f'output {k}: {v.name}', _shape(v)))}, shape=house, {IO_STYLE}];")
            if id(v) in src:
                lines.append(f"{indent}{src[id(v)]} -> {o};")
            out_ids.append(o)
        return in_ids, out_ids

    emit(g, {}, "  ")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _bodies(n) -> list[tuple[str, Any]]:
    from partition import Graph
    return [(k, v) for k, v in n.attrs.items() if isinstance(v, Graph)]
