"""Fuzz family "onnx": mutations of real ONNX models through ``accel-tune simulate --onnx``.

Each case takes one real model (tests/data/zoo exports from both torch exporters, one with its
weights in an external ``.data`` file, and ../shared/models files with stripped weights) and
mutates it from the case's seed, at one of these levels:
- bytes: truncation and byte flips of the serialized file;
- fields: ir_version, opset version, producer and graph names, metadata;
- dtypes and shapes: initializer and input element types (known, STRING, unknown codes), input
  and initializer dims (0, negative, huge, symbolic), raw data shorter or longer than its dims;
- attributes: a node attribute's type or value (floats for ints, huge, negative, empty, strings);
- graph rewiring (in the main graph or an If/Loop body): an input renamed to another value or to
  nothing defined, two nodes defining one value, a node dropped, nodes reordered, an op type
  swapped, a graph output renamed;
- external data: location outside the folder (``..``, absolute, a symlink escaping it or to a
  device), a missing file, offsets and lengths beyond the file, junk keys and values.

The case knows what it made: an unchanged or benignly changed model must simulate (latency and
energy finite and positive, the parts summing to the whole); a model that breaks a rule the
importer enforces (SSA, undefined names, IR or opset out of range, external data outside the
folder or beyond its file) must end in one error line; anything else may end either way, but
never in a traceback, a hang or memory exhaustion.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper

from fuzzgen import Case, choose, finite
from partition.onnx.proto import all_graphs as _graphs  # the graph and its If/Loop bodies

FAMILY = "onnx"
ROOT = Path(__file__).resolve().parents[2]
ZOO = ROOT / "tests" / "data" / "zoo"
SHARED = ROOT.parent / "shared" / "models"
# Small models that simulate in well under a second each, covering both exporters, external data,
# stripped weights, recurrent ops and detection post-processing.
BASES = [ZOO / n for n in ("det_ssd.dynamo.onnx", "det_ssd.ts.onnx", "squeezenet_fire.dynamo.onnx",
                           "gru_tagger.ts.onnx", "espcn.ts.onnx", "gpt_block_lm.ts.onnx")]
BASES += [SHARED / n for n in ("tiny_detector_topk.shapes.onnx", "mobilenet_v2.shapes.onnx")]
BASES = [p for p in BASES if p.exists()]


def _check_simulate(out, positive: bool = False) -> None:
    """Finite, non-negative figures whose parts sum to the latency; ``positive`` for a model known
    to compute something (a rewired graph whose output is its input costs nothing)."""
    d = json.loads(out.out)
    assert finite(d["latency_s"], positive) and finite(d["energy_j"], positive), d
    parts = [d[k] for k in ("host_s", "link_s", "launch_s", "device_s")]
    assert all(finite(p) for p in parts), d
    assert abs(sum(parts) - d["latency_s"]) <= 1e-9 * max(d["latency_s"], 1e-30), d


def _load(path: Path) -> onnx.ModelProto:
    return onnx.load(str(path), load_external_data=False)


def _save(model: onnx.ModelProto, src: Path, tmp: Path) -> Path:
    """``model`` written into ``tmp`` as the source's file name, beside a copy of its external data."""
    for f in src.parent.glob(src.name + ".data"):
        shutil.copy(f, tmp / f.name)
    out = tmp / src.name
    out.write_bytes(model.SerializeToString())
    return out


def _pick_graph(rng, m):
    gs = [g for g in _graphs(m.graph) if len(g.node)]
    return gs[int(rng.integers(len(gs)))] if gs else m.graph


def _graph_values(g) -> list[str]:
    return [v.name for v in g.input] + [t.name for t in g.initializer] + [o for n in g.node for o in n.output if o]


# ------------------------------------------------------------------------------------- mutations
# Each returns (label, expect) after editing the model (or the file) in place.

def _benign(rng, m, tmp, src):
    what = choose(rng, ["producer", "doc", "graph name", "metadata", "none"])
    if what == "producer":
        m.producer_name, m.producer_version = "fuzz\u00e9" * int(rng.integers(1, 50)), "0"
    elif what == "doc":
        m.graph.doc_string = "x" * int(rng.integers(0, 10000))
    elif what == "graph name":
        m.graph.name = choose(rng, ["", "g", "../../x", "\u2603"])
    elif what == "metadata":
        m.metadata_props.add(key=choose(rng, ["a", "weights_stripped_not", ""]), value="1")
    return f"benign {what}", "ok"


def _fields(rng, m, tmp, src):
    what = choose(rng, ["ir", "opset", "no opset", "domain opset"])
    if what == "ir":
        v = int(choose(rng, [-1, 0, 1, 3, 7, 10, onnx.IR_VERSION, onnx.IR_VERSION + 1, 2**40]))
        m.ir_version = v
        ok = 1 <= v <= onnx.IR_VERSION
        return f"ir_version {v}", "any" if ok else "error"
    if what == "opset":
        v = int(choose(rng, [-5, 0, 1, 10, 11, 17, 21, 28, 29, 1000, 2**40]))
        for imp in m.opset_import:
            if imp.domain in ("", "ai.onnx"):
                imp.version = v
        return f"opset {v}", "any" if 11 <= v <= onnx.defs.onnx_opset_version() else "error"
    if what == "no opset":
        keep = [i for i in m.opset_import if i.domain not in ("", "ai.onnx")]
        del m.opset_import[:]
        m.opset_import.extend(keep)
        return "no default opset", "error"
    m.opset_import.add(domain="com.fuzz", version=int(rng.integers(-3, 5)))
    return "extra domain opset", "any"


def _dtypes(rng, m, tmp, src):
    g = m.graph
    codes = [TensorProto.STRING, TensorProto.INT64, TensorProto.FLOAT16, TensorProto.BOOL, TensorProto.DOUBLE,
             TensorProto.UNDEFINED, 77, 10**6, -3, TensorProto.COMPLEX64, TensorProto.UINT4]
    code = int(choose(rng, codes))
    if g.initializer and rng.random() < 0.6:
        t = g.initializer[int(rng.integers(len(g.initializer)))]
        t.data_type = code
        return f"initializer {t.name!r} elem_type {code}", "any"
    vi = g.input[int(rng.integers(len(g.input)))]
    vi.type.tensor_type.elem_type = code
    return f"input elem_type {code}", "any"


def _shapes(rng, m, tmp, src):
    g = m.graph
    if g.initializer and rng.random() < 0.5:
        t = g.initializer[int(rng.integers(len(g.initializer)))]
        if t.dims:
            i = int(rng.integers(len(t.dims)))
            t.dims[i] = int(choose(rng, [0, 1, t.dims[i] + 1, 2**31, 2**62, -1]))
        else:
            t.dims.append(int(choose(rng, [0, 2, 2**40])))
        return f"initializer {t.name!r} dims {list(t.dims)}", "any"
    vi = g.input[int(rng.integers(len(g.input)))]
    dims = vi.type.tensor_type.shape.dim
    if not len(dims):
        dims.add().dim_value = 3
        return "input rank grown", "any"
    d = dims[int(rng.integers(len(dims)))]
    pick = choose(rng, ["zero", "negative", "huge", "symbolic", "drop", "add"])
    if pick == "zero":
        d.dim_value = 0
    elif pick == "negative":
        d.dim_value = -4
    elif pick == "huge":
        d.dim_value = int(choose(rng, [2**31, 2**40, 10**12]))
    elif pick == "symbolic":
        d.dim_param = "n"
    elif pick == "drop":
        del dims[-1]
    else:
        dims.add().dim_value = 1
    return f"input dim {pick}", "any"


def _attributes(rng, m, tmp, src):
    nodes = [n for g in _graphs(m.graph) for n in g.node if len(n.attribute)]
    if not nodes:
        return "no attributes", "ok"
    n = nodes[int(rng.integers(len(nodes)))]
    a = n.attribute[int(rng.integers(len(n.attribute)))]
    pick = choose(rng, ["floats", "huge int", "negative ints", "empty ints", "string", "undefined", "graph"])
    name = a.name
    if a.type in (AttributeProto.GRAPH, AttributeProto.TENSOR) and pick != "undefined":
        pick = "string"
    a.Clear()
    a.name = name
    if pick == "floats":
        a.CopyFrom(helper.make_attribute(name, [1.5, 2.0]))
    elif pick == "huge int":
        a.CopyFrom(helper.make_attribute(name, int(choose(rng, [2**62, -2**62, 2**31]))))
    elif pick == "negative ints":
        a.CopyFrom(helper.make_attribute(name, [-1, -7, -(2**40)]))
    elif pick == "empty ints":
        a.name, a.type = name, AttributeProto.INTS
    elif pick == "string":
        a.CopyFrom(helper.make_attribute(name, "fuzz"))
    elif pick == "graph":
        a.CopyFrom(helper.make_attribute(name, helper.make_graph([], "empty", [], [])))
    else:
        a.type = AttributeProto.UNDEFINED
    return f"{n.op_type}.{name} {pick}", "any"


def _rewire(rng, m, tmp, src):
    g = _pick_graph(rng, m)
    nodes = list(g.node)
    if not nodes:
        return "empty graph", "any"
    n = g.node[int(rng.integers(len(g.node)))]
    pick = choose(rng, ["input to another", "input undefined", "duplicate output", "drop node", "reverse",
                        "op type", "output renamed", "self loop"])
    if pick == "input to another" and len(n.input):
        n.input[int(rng.integers(len(n.input)))] = choose(rng, _graph_values(g))
        return pick, "any"
    if pick == "input undefined" and len(n.input):
        n.input[int(rng.integers(len(n.input)))] = "fuzz_nowhere"
        return pick, "error" if g is m.graph else "any"  # a dead branch may never be imported
    if pick == "duplicate output" and len(nodes) > 1 and len(n.output):
        other = g.node[(list(g.node).index(n) + 1) % len(g.node)]
        if len(other.output) and other.output[0] != n.output[0]:
            other.output[0] = n.output[0]
            return pick, "error"
    if pick == "drop node":
        g.node.remove(n)
        return pick, "any"
    if pick == "reverse":
        rev = list(reversed(nodes))
        del g.node[:]
        g.node.extend(rev)
        return pick, "any"
    if pick == "op type":
        n.op_type = choose(rng, ["Relu", "Conv", "NonZero", "Loop", "Fuzz", "", "Reshape", "If"])
        return f"op type {n.op_type!r}", "any"
    if pick == "output renamed" and len(g.output):
        g.output[0].name = choose(rng, ["fuzz_nowhere"] + _graph_values(g))
        return pick, "any"
    if pick == "self loop" and len(n.input) and len(n.output):
        n.input[0] = n.output[0]
        return pick, "any"
    return f"{pick} (no-op)", "any"


def _external(rng, m, tmp, src):
    ext = [t for t in m.graph.initializer if t.data_location == TensorProto.EXTERNAL]
    if not ext:
        return "no external data", "ok"
    t = ext[int(rng.integers(len(ext)))]
    info = {e.key: e for e in t.external_data}
    pick = choose(rng, ["dotdot", "absolute", "symlink out", "symlink device", "missing", "offset beyond",
                        "length beyond", "junk offset", "negative length", "no location"])
    loc = info["location"]
    if pick == "dotdot":
        loc.value = choose(rng, ["../../etc/passwd", "../" + src.name + ".data", "a/../../x.data"])
    elif pick == "absolute":
        loc.value = choose(rng, ["/etc/passwd", str(src) + ".data", "/dev/zero"])
    elif pick == "symlink out":
        (tmp / "link.data").symlink_to(src.parent / (src.name + ".data"))
        loc.value = "link.data"
    elif pick == "symlink device":
        (tmp / "dev.data").symlink_to("/dev/zero")
        loc.value = "dev.data"
    elif pick == "missing":
        loc.value = "gone.data"
    elif pick == "offset beyond":
        info.setdefault("offset", t.external_data.add(key="offset")).value = str(10**9)
    elif pick == "length beyond":
        info.setdefault("length", t.external_data.add(key="length")).value = str(2**40)
    elif pick == "junk offset":
        info.setdefault("offset", t.external_data.add(key="offset")).value = choose(rng, ["x", "1e3", "", "-0x10"])
    elif pick == "negative length":
        info.setdefault("length", t.external_data.add(key="length")).value = "-16"
    else:
        t.external_data.remove(loc)
    return f"external {pick}", "error"


def _bytes(rng, m, tmp, src):
    """Returns the label; the caller serializes, then corrupts the bytes."""
    return choose(rng, ["truncate", "flip"]), "any"


MUTATIONS = [_benign, _fields, _dtypes, _shapes, _attributes, _rewire, _external, _bytes]


def make_case(seed: int, tmp: Path) -> Case:
    rng = np.random.default_rng(seed)
    src = BASES[int(rng.integers(len(BASES)))]
    m = _load(src)
    mutate = MUTATIONS[int(rng.integers(len(MUTATIONS)))]
    label, expect = mutate(rng, m, tmp, src)
    path = _save(m, src, tmp)
    if mutate is _bytes:
        raw = bytearray(path.read_bytes())
        if label == "truncate":
            raw = raw[:int(rng.integers(len(raw)))]
        else:
            for i in rng.integers(len(raw), size=int(rng.integers(1, 20))):
                raw[int(i)] = int(rng.integers(256))
        path.write_bytes(bytes(raw))
    argv = ["simulate", "--onnx", str(path), "--hw", "edge-npu", "--json"]
    return Case(f"{src.name}: {label}", argv, expect,
                lambda out: _check_simulate(out, positive=label.startswith("benign")))


def test_fuzz_onnx(fuzz_case, fuzz_seed, cli, fuzz_check, tmp_path):
    case = make_case(fuzz_seed + fuzz_case, tmp_path)
    out = fuzz_check(FAMILY, case.label, cli(case.argv, timeout_s=60))
    assert case.expect in ("any", out.kind), f"{case.label}: expected {case.expect}, got {out.kind}: {out.err}"
    if out.kind == "ok":
        case.check(out)


def test_bases_simulate_unchanged(cli, fuzz_check, tmp_path):
    """Every base model simulates as it is (so a refusal of a mutant is the mutation's doing)."""
    assert len(BASES) >= 6
    for src in BASES:
        path = _save(_load(src), src, tmp_path)
        out = fuzz_check(FAMILY, f"{src.name}: unchanged", cli(["simulate", "--onnx", str(path), "--hw",
                                                                 "edge-npu", "--json"], timeout_s=60))
        assert out.kind == "ok", out.err
        _check_simulate(out, positive=True)
        os.remove(path)
