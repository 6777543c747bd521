"""accel-tune run / inspect on plans written by tuner.Plan.save: outputs equal the reference
interpreter on the source model, the simulated host/link/launch terms agree with the tuner's own
costing (an independent implementation), inspect reports what the plan holds, --dot is valid DOT,
and bad archives or inputs give one line."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import tuner
from partition import interpret, load_onnx, models, read_packed
from sim.graph.runtime import example_inputs, load
from tuner.cli import main

SHARED = Path(__file__).resolve().parents[3] / "shared" / "models"  # ../shared beside the checkout


@pytest.fixture(scope="module")
def bert(tmp_path_factory):
    """bert_tiny tuned (a few trials) for edge-npu and saved: (plan, path)."""
    plan = tuner.tune(models.get("bert_tiny"), "edge-npu", trials=8, progress=False)
    path = tmp_path_factory.mktemp("plans") / "bert_tiny.zip"
    plan.save(path)
    return plan, path


def cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_same(got, want):
    assert got.shape == want.shape and got.dtype == want.dtype
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ----------------------------------------------------------------------------- run
def test_run_default_inputs_json_and_output_file(bert, tmp_path, capsys):
    plan, path = bert
    out = tmp_path / "out.npz"
    rc, text, err = cli(capsys, "run", path, "--json", "-o", out)
    assert rc == 0, err
    obj = json.loads(text)
    # Default inputs: deterministic, token ids inside the 30522-row embedding, mask all ones.
    x = example_inputs(load(path), seed=0)
    assert x["input_ids"].max() < 30522 and (x["attention_mask"] == 1).all()
    want = interpret(models.get("bert_tiny"), x)
    with np.load(out, allow_pickle=False) as z:
        got = [z[k] for k in z.files]
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)
    assert list(obj["outputs"].values()) == [{"shape": list(w.shape), "dtype": w.dtype.name} for w in want]
    b = obj["breakdown"]
    assert obj["latency_s"] == pytest.approx(b["host_s"] + b["link_s"] + b["launch_s"] + b["device_s"])
    # tuner.costing and the runtime model host ops, transfers and launches separately: they agree.
    c = plan.cost.total
    for k in ("host_s", "link_s", "launch_s"):
        assert b[k] == pytest.approx(getattr(c, k), rel=1e-9), k
    assert {s: f["calls"] for s, f in b["functions"].items()} == {s: f.calls for s, f in plan.cost.functions.items()}
    # Device time: the same schedules on the same simulator; the runtime also keeps intermediates
    # that fit on chip, so it is never slower than the plan's per-kernel sum.
    assert 0.8 * c.device_s <= b["device_s"] <= c.device_s * (1 + 1e-9)
    assert obj["predicted"]["latency_s"] == pytest.approx(plan.latency_s)
    assert obj["hardware"] == "edge-npu" and obj["model"] == "bert_tiny"


def test_run_text_output(bert, capsys):
    _, path = bert
    rc, text, _ = cli(capsys, "run", path)
    assert rc == 0
    mod = load(path)
    res = mod.run(example_inputs(mod))
    assert len(res.outputs) == 2  # sequence output and pooled output
    for name, v in res.outputs.items():
        assert f"  {name}  float32[{','.join(map(str, v.shape))}]" in text
    assert f"simulated latency {res.latency_s * 1e3:.3f} ms" in text
    for f in res.breakdown.functions:
        assert re.search(rf"^  {re.escape(f.symbol)}\s+{f.calls}\s+{f.cycles:,}\s", text, re.M), f.symbol
    assert "plan's prediction: latency" in text


def test_run_with_inputs_file(bert, tmp_path, capsys):
    _, path = bert
    rng = np.random.default_rng(5)
    x = {"input_ids": rng.integers(0, 30522, (1, 128)).astype(np.int64),
         "attention_mask": np.concatenate([np.ones((1, 100)), np.zeros((1, 28))], axis=1).astype(np.int64)}
    np.savez(tmp_path / "in.npz", **x)
    rc, text, err = cli(capsys, "run", path, "--inputs", tmp_path / "in.npz", "-o", tmp_path / "o.npz", "--json")
    assert rc == 0, err
    assert json.loads(text)["inputs"] == str(tmp_path / "in.npz")
    with np.load(tmp_path / "o.npz") as z:
        got = [z[k] for k in z.files]
    for g, w in zip(got, interpret(models.get("bert_tiny"), x)):
        assert_same(g, w)


def test_wrong_inputs_give_one_line(bert, tmp_path, capsys):
    _, path = bert
    ids = np.zeros((1, 128), np.int64)
    cases = {
        "names.npz": ({"input_ids": ids, "mask": ids},
                      "names.npz: unknown input(s) 'mask'; the module takes input_ids, attention_mask"),
        "missing.npz": ({"input_ids": ids}, "missing.npz: missing input(s) 'attention_mask'"),
        "shape.npz": ({"input_ids": ids[:, :64], "attention_mask": ids},
                      "shape.npz: input 'input_ids': expected shape [1, 128], got [1, 64]"),
        "dtype.npz": ({"input_ids": ids.astype(np.float32) + 0.5, "attention_mask": ids},
                      "dtype.npz: input 'input_ids': expected dtype int64, got float32, and 128 of 128 values "
                      "would change in the cast"),
    }
    for fname, (arrays, msg) in cases.items():
        np.savez(tmp_path / fname, **arrays)
        rc, out, err = cli(capsys, "run", path, "--inputs", tmp_path / fname)
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and err.startswith("accel-tune: error: ") and msg in err, err
    np.save(tmp_path / "one.npy", ids)
    np.savez(tmp_path / "obj.npz", input_ids=np.array([{"a": 1}], dtype=object), attention_mask=ids)
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    for fname, msg in (("one.npy", "not an .npz archive of named arrays"), ("obj.npz", "is an object array stored with pickle; refusing to load it"),
                       ("junk.npz", "not a readable .npz file"), ("absent.npz", "inputs file not found")):
        rc, out, err = cli(capsys, "run", path, "--inputs", tmp_path / fname)
        assert rc == 2 and err.count("\n") == 1 and msg in err, err


# ----------------------------------------------------------------------------- bad archives
@pytest.mark.parametrize("command", ["run", "inspect"])
def test_malformed_archive_is_one_line(bert, tmp_path, capsys, command):
    _, path = bert
    data = Path(path).read_bytes()
    (tmp_path / "trunc.zip").write_bytes(data[: len(data) // 3])
    rc, out, err = cli(capsys, command, tmp_path / "trunc.zip")
    assert rc == 2 and out == ""
    assert err.startswith("accel-tune: error: trunc.zip: not a readable zip archive (truncated or corrupt")
    assert err.count("\n") == 1
    rc, _, err = cli(capsys, command, tmp_path / "none.zip")
    assert rc == 2 and err.count("\n") == 1 and "no such file" in err


# ----------------------------------------------------------------------------- inspect
def test_inspect_json_reports_the_plan(bert, capsys):
    plan, path = bert
    rc, text, err = cli(capsys, "inspect", path, "--json")
    assert rc == 0, err
    s = json.loads(text)
    assert s["model"]["name"] == "bert_tiny" and s["hardware"] == "edge-npu" and s["format_version"] == "1.0"
    assert set(s["functions"]) == set(plan.cost.functions)
    externals = {sym for sym in plan.cost.functions}
    host = [n for n in plan.graph.nodes if not (n.op == "call" and n.attrs["callee"] in externals)]
    assert s["partition"]["host_ops"] == len(host)
    assert s["partition"]["call_sites"] == len(plan.graph.nodes) - len(host)
    assert s["predicted"]["latency_s"] == pytest.approx(plan.latency_s)
    for sym, f in s["functions"].items():
        body = plan.graph.functions[sym].graph
        assert [k["name"] for k in f["kernels"]] == [n.name for n in body.nodes]
        want = {k: v.to_dict() for k, v in plan.schedules[sym].items()}
        assert {k["name"]: k["schedule"] for k in f["kernels"]} == want
        fc = plan.cost.functions[sym]
        assert f["predicted"]["cycles"] == fc.cycles
        assert [k["predicted"]["cycles"] for k in f["kernels"]] == [k.cycles for k in fc.kernels]
        # fp32 weights are stored on the int8 device as one-byte words
        assert plan.hw.array.word_bytes == 1
        assert f["weight_bytes"] == sum(c.data.size for c in body.constants) + sum(
            c.data.size for fn in body.functions.values() for c in fn.graph.constants)
    mod = read_packed(path)
    assert s["partition"]["params"] == len(mod.params)


def test_inspect_text(bert, capsys):
    plan, path = bert
    rc, text, _ = cli(capsys, "inspect", path)
    assert rc == 0
    assert f"predicted: latency {plan.latency_s * 1e3:.3f} ms" in text
    for sym, scheds in plan.schedules.items():
        assert f"@{sym} [edge-npu]" in text
        for k, sch in scheds.items():
            assert re.search(rf"^  {re.escape(k)}: ", text, re.M)
            assert f"tiles m{sch.tile_m} n{sch.tile_n} k{sch.tile_k}, order {sch.loop_order}" in text


# ----------------------------------------------------------------------------- DOT
_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<id>[A-Za-z_][A-Za-z_0-9]*|-?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?))'
                    r'|(?P<op>->|[{}\[\]=;,]))', re.S)


def parse_dot(text: str) -> dict:
    """A strict parser for the DOT subset (graphviz.org/doc/info/lang.html): digraph, node, edge
    and attribute statements, subgraphs. Returns nodes {id: attrs} and edges [(a, b, attrs)];
    raises AssertionError on anything it does not accept."""
    toks, pos = [], 0
    text = text.rstrip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        assert m and m.end() > pos, f"bad DOT token at {text[pos:pos + 30]!r}"
        toks.append(m.group("str") or m.group("id") or m.group("op"))
        pos = m.end()
    i = 0
    nodes, edges = {}, []

    def take(want=None):
        nonlocal i
        assert i < len(toks), "unexpected end of DOT"
        t = toks[i]
        assert want is None or t == want, f"expected {want!r}, got {t!r}"
        i += 1
        return t

    def ident():
        t = take()
        assert t not in "{}[]=;," and t != "->", f"expected an ID, got {t!r}"
        return t

    def attrs():
        a = {}
        while toks[i] == "[":
            take("[")
            while toks[i] != "]":
                k = ident()
                take("=")
                a[k] = ident()
                if toks[i] in (",", ";"):
                    take()
            take("]")
        return a

    def stmts():
        while toks[i] != "}":
            if toks[i] == "subgraph":
                take()
                ident()
                take("{")
                stmts()
                take("}")
            elif toks[i] in ("graph", "node", "edge"):
                take()
                attrs()
            else:
                a = ident()
                if toks[i] == "->":
                    chain = [a]
                    while toks[i] == "->":
                        take()
                        chain.append(ident())
                    at = attrs()
                    edges.extend((x, y, at) for x, y in zip(chain, chain[1:]))
                else:
                    nodes[a] = attrs()
            if toks[i] == ";":
                take()

    take("digraph")
    ident()
    take("{")
    stmts()
    take("}")
    assert i == len(toks), "trailing tokens after the graph"
    return {"nodes": nodes, "edges": edges}


def test_dot_is_valid_and_distinguishes_host_and_device(bert, capsys):
    plan, path = bert
    rc, text, _ = cli(capsys, "inspect", path, "--dot")
    assert rc == 0
    d = parse_dot(text)
    assert all(a in d["nodes"] and b in d["nodes"] for a, b, _ in d["edges"]), "edge to an undeclared node"
    shapes = [a.get("shape") for a in d["nodes"].values()]
    externals = set(plan.cost.functions)
    calls = [n for n in plan.graph.nodes if n.op == "call" and n.attrs["callee"] in externals]
    assert shapes.count("box3d") == len(calls)
    assert shapes.count("box") == len(plan.graph.nodes) - len(calls)
    assert shapes.count("invhouse") == len(plan.graph.inputs) and shapes.count("house") == len(plan.graph.outputs)
    fills = {a["shape"]: a["fillcolor"] for a in d["nodes"].values() if a.get("shape") in ("box", "box3d")}
    assert fills["box"] != fills["box3d"]
    labels = [a["label"] for a in d["nodes"].values() if a.get("shape") == "box3d"]
    assert sorted(lb.split("\\n")[0] for lb in labels) == sorted(f'"@{n.attrs["callee"]}' for n in calls)


def test_dot_draws_control_flow_bodies_as_clusters(tmp_path, capsys):
    """byoc_demo: a Loop whose body holds an If; each body is a dashed cluster."""
    plan = tuner.tune(models.get("byoc_demo"), "edge-npu", trials=0, progress=False)
    plan.save(tmp_path / "demo.zip")
    rc, text, _ = cli(capsys, "inspect", tmp_path / "demo.zip", "--dot")
    assert rc == 0
    d = parse_dot(text)
    assert text.count("subgraph cluster_") == 3  # loop body, then and else branches
    assert [a.get("shape") for a in d["nodes"].values()].count("hexagon") == 2
    # Labels with quotes and backslashes stay valid DOT.
    from tuner.cli.cmd_inspect import _q
    tricky = _q('say "hi" \\ there\nnext')
    assert parse_dot("digraph g { a [label=" + tricky + "]; }")["nodes"]["a"]["label"] == tricky
    assert tricky == '"say \\"hi\\" \\\\ there\\nnext"'


def test_json_and_dot_are_exclusive(bert, capsys):
    _, path = bert
    with pytest.raises(SystemExit) as e:
        main(["inspect", str(path), "--json", "--dot"])
    assert e.value.code == 2


# ----------------------------------------------------------------------------- round trips via Plan
def _plan_round_trip(graph, tmp_path):
    plan = tuner.tune(graph, "edge-npu", trials=0, progress=False)
    plan.save(tmp_path / "p.zip")
    mod = load(tmp_path / "p.zip")
    x = example_inputs(mod)
    res = mod.run(x)
    want = interpret(graph, x)
    assert len(res.outputs) == len(want)
    for g, w in zip(res.outputs.values(), want):
        assert_same(g, w)
    c = plan.cost.total
    assert res.breakdown.link_s == pytest.approx(c.link_s, rel=1e-9)
    assert res.breakdown.launch_s == pytest.approx(c.launch_s, rel=1e-9)


@pytest.mark.parametrize("name", ["byoc_demo", "bert_tiny"])
def test_plan_round_trip_small(name, tmp_path):
    _plan_round_trip(models.get(name), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["resnet18", "ssd_detector", "mobilenet_v2", "resnet50", "bert_base"])
def test_plan_round_trip_builtin(name, tmp_path):
    _plan_round_trip(models.get(name), tmp_path)


@pytest.mark.slow
@pytest.mark.skipif(not SHARED.is_dir(), reason="shared models not present")
@pytest.mark.parametrize("fname", sorted(p.name for p in SHARED.glob("*.onnx")) if SHARED.is_dir() else [])
def test_plan_round_trip_shared(fname, tmp_path):
    _plan_round_trip(load_onnx(SHARED / fname), tmp_path)


# ----------------------------------------------------------------------------- README
@pytest.mark.slow
def test_readme_export_section_runs_as_written(tmp_path):
    """Every command of README's "Export and run a plan" block, in a fresh directory."""
    import subprocess
    root = Path(__file__).resolve().parents[2]
    text = (root / "README.md").read_text()
    section = text.split("## Export and run a plan", 1)[1]
    block = section.split("```bash\n", 1)[1].split("```", 1)[0]
    commands = [ln for ln in block.splitlines() if ln.strip()]
    assert any(c.startswith("accel-tune tune ") and " -o " in c for c in commands)
    assert any(c.startswith("accel-tune run ") for c in commands)
    assert any(c.startswith("accel-tune inspect ") for c in commands)
    (tmp_path / "experiments").symlink_to(root / "experiments")
    for c in commands:
        r = subprocess.run(c, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, f"{c}: {r.stderr[-500:]}"
    # Everything the block writes is under out/, which .gitignore covers: nothing left in a checkout.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["experiments", "out"]
    assert "/out/" in (root / ".gitignore").read_text().split()
    out = tmp_path / "out"
    with np.load(out / "outputs.npz") as z:
        (logits,) = [z[k] for k in z.files]
    with np.load(out / "image.npz") as z:
        x = {"pixel_values": z["pixel_values"]}
    assert_same(logits, interpret(models.get("resnet18"), x)[0])
    parse_dot((out / "resnet18.dot").read_text())


def test_float16_model_offloads_and_runs_back(tmp_path):
    """A model exported in float16 offloads like a float32 one (the array computes in its own
    mac_dtype), and its packed plan runs back to the interpreter's float16 outputs."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    import sim
    rng = np.random.default_rng(0)
    w1 = numpy_helper.from_array((rng.standard_normal((32, 3, 3, 3)) * 0.2).astype(np.float16), "w1")
    w2 = numpy_helper.from_array((rng.standard_normal((32, 32, 3, 3)) * 0.05).astype(np.float16), "w2")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c2"], ["y"])]
    g = helper.make_graph(nodes, "fp16net", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [1, 3, 64, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)], [w1, w2])
    path = tmp_path / "fp16.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    graph = load_onnx(path)
    plan = tuner.tune(graph, sim.load_hw("edge-npu"), trials=4, seed=0, progress=False)
    assert plan.cost.functions, "the convolutions should be offloaded"
    plan.save(tmp_path / "p.zip")
    x = rng.standard_normal((1, 3, 64, 64)).astype(np.float16)
    res = sim.graph.runtime.load(tmp_path / "p.zip").run([x])
    (got,) = res.outputs.values()
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, interpret(graph, [x])[0])
    assert res.latency_s == pytest.approx(plan.latency_s, rel=1e-9)
