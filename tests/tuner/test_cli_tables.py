"""The CLI tables: tune's task names are whole and unique, its gain column follows --objective and
EDP is printed; hw show prints TOML that loads back as the same machine and names a modified file
after itself; partition takes a hardware name as its target and lists the region ids
--keep-on-host takes."""
from __future__ import annotations

import json
import re

import pytest

import sim
from partition import Graph, clone_graph
from partition.byoc.pipeline import region_passes, run_passes
from partition.models import get, list_models
from tuner.cli import main
from tuner.cli.cmd_tune import task_label
from tuner.costing import kernel_workload


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _candidate_keys(graph, hw) -> set[str]:
    """The workload key of every node the partitioner marks for ``hw``'s target, in subgraphs too:
    the kernels ``Problem`` would cost, before it drops those no schedule fits (a superset, so
    labels unique over it are unique over any plan's tasks), without a mapping search."""
    target = hw.partition_target()
    prepared = run_passes(clone_graph(graph), target, region_passes())
    keys = set()

    def walk(g, scope):
        scope = {**scope, **g.functions}
        for n in g.nodes:
            if n.meta.get("target") == target.name:
                try:
                    keys.add(kernel_workload(n, scope).key)
                except ValueError:  # no simulator model of the op
                    pass
            for sg in n.attrs.values():
                if isinstance(sg, Graph):
                    walk(sg, scope)
    walk(prepared, {})
    return keys


def test_task_labels_are_unique_and_complete_over_every_model_and_preset():
    keys, seen = set(), set()
    models = [get(m.name) for m in list_models()]   # built once: building bert_base's weights is seconds
    for preset in sim.hw.presets.names():
        hw = sim.load_hw(preset)
        # the workloads follow from what is offloaded and how it is stored: a preset that differs
        # only in timing (eyeriss-chip is eyeriss with the chip's link) adds no key
        same = (hw.support, hw.vector, hw.array.word_bytes, hw.array.mac_dtype)
        if same in seen:
            continue
        seen.add(same)
        for g in models:
            keys |= _candidate_keys(g, hw)
    labels = {task_label(k) for k in keys}
    assert len(keys) > 100 and len(labels) == len(keys)
    # The two ResNet-50 layers issue 11 saw as one row (same prefix, other epilogue).
    a = "conv2d(n=1,c=64,h=56,w=56,k=256,r=1,s=1,stride_h=1,stride_w=1,pad_t=0,pad_l=0,pad_b=0,pad_r=0,dil_h=1,dil_w=1,groups=1)x4B|batch_norm"
    assert task_label(a) == "conv 1x64x56x56 k256 1x1 +batch_norm"
    assert task_label(a + "+add+relu") == "conv 1x64x56x56 k256 1x1 +batch_norm+add+relu"
    assert task_label(a.replace("pad_t=0", "pad_t=1").replace("groups=1", "groups=2")) == \
        "conv 1x64x56x56 k256 1x1 p1,0,0,0 g2 +batch_norm"
    assert task_label("gemm(b=12,m=128,n=64,k=128)x2B") == "gemm 128x64x128 b12 2B"


@pytest.mark.parametrize("objective", ["latency", "energy", "edp"])
def test_tune_gain_follows_the_objective_and_edp_is_printed(capsys, objective):
    code, out, _ = _run(capsys, "tune", "--model", "bert_tiny", "--hw", "edge-npu", "--trials", "4",
                        "--objective", objective, "--json")
    assert code == 0
    d = json.loads(out)
    code, text, _ = _run(capsys, "tune", "--model", "bert_tiny", "--hw", "edge-npu", "--trials", "4",
                         "--objective", objective)
    assert code == 0
    assert f"{objective} gain" in text and "EDP mJ*ms" in text

    def value(c):
        return {"latency": c["latency_s"], "energy": c["energy_j"],
                "edp": c["latency_s"] * c["energy_j"]}[objective]
    for name, b in d["baselines"].items():
        want = value(b) / value(d)
        assert d["gain"][name] == pytest.approx(want, rel=1e-12)
        row = re.search(rf"^  {name}\s+([\d.]+)\s+([\d.]+)\s+(\S+)\s+([\d.]+)x$", text, re.M)
        assert row, name
        assert float(row.group(4)) == pytest.approx(want, abs=0.006)
        assert float(row.group(3)) == pytest.approx(b["latency_s"] * b["energy_j"] * 1e6, rel=1e-3)
    # Task rows are never cut: every label appears whole.
    for t in d["tasks"]:
        assert f"  {task_label(t['workload'])} " in text


@pytest.mark.parametrize("name", [*sim.hw.presets.names(), "modified"])
def test_hw_show_text_loads_back_as_the_same_machine(capsys, tmp_path, name):
    if name == "modified":
        src = tmp_path / "my_npu.toml"
        src.write_text('base = "edge-npu"\n[array]\nrows = 32\n[link]\nbytes_per_s = 2e9\n')
        name = str(src)
    code, text, _ = _run(capsys, "hw", "show", name)
    assert code == 0
    f = tmp_path / "shown.toml"
    f.write_text(text)
    assert sim.load_hw(f).fingerprint() == sim.load_hw(name).fingerprint()
    code, again, _ = _run(capsys, "hw", "show", str(f), "--json")
    assert json.loads(again)["fingerprint"] == sim.load_hw(name).fingerprint()


def test_a_modified_file_shows_its_own_name_and_what_it_changed(capsys, tmp_path):
    src = tmp_path / "my_npu.toml"
    src.write_text('base = "edge-npu"\n[array]\nrows = 32\n')
    hw = sim.load_hw(src)
    assert hw.name == "my_npu" and "edge-npu" in hw.description and "array.rows = 32" in hw.description
    code, text, _ = _run(capsys, "hw", "show", str(src))
    assert text.splitlines()[0].startswith("# my_npu: edge-npu with array.rows = 32")
    # A file that names itself keeps its name; one that changes nothing is the base itself.
    named = tmp_path / "n.toml"
    named.write_text('base = "edge-npu"\nname = "mine"\n[array]\nrows = 32\n')
    assert sim.load_hw(named).name == "mine"
    same = tmp_path / "s.toml"
    same.write_text('base = "edge-npu"\n')
    assert sim.load_hw(same).name == "edge-npu"


def test_partition_target_takes_a_hardware_name_or_file(capsys, tmp_path):
    code, out, _ = _run(capsys, "partition", "--model", "resnet18", "--target", "edge-npu", "--json")
    assert code == 0
    d = json.loads(out)
    hw = sim.load_hw("edge-npu")
    assert d["target"] == hw.support.target
    assert all(f["symbol"].startswith(f"{hw.support.target}_main_") for f in d["functions"])
    # A tuned plan names its functions the same way.
    from tuner.tune import tune
    plan = tune(get("resnet18"), hw, trials=0, progress=False)
    assert {f["symbol"] for f in d["functions"]} == set(plan.cost.functions)
    f = tmp_path / "hw.toml"
    f.write_text('base = "edge-npu"\n[support]\ntarget = "mynpu"\n')
    code, out, _ = _run(capsys, "partition", "--model", "resnet18", "--target", str(f), "--json")
    assert code == 0 and json.loads(out)["target"] == "mynpu"
    code, _, err = _run(capsys, "partition", "--model", "resnet18", "--target", "nope")
    assert code == 2 and len(err.strip().splitlines()) == 1 and "neither a built-in target" in err


def test_partition_lists_the_region_ids_keep_on_host_takes(capsys):
    code, text, _ = _run(capsys, "partition", "--model", "resnet18", "--target", "edge-npu")
    assert code == 0
    ids = [int(m) for m in re.findall(r"^\s+(\d+)  resnet18: ", text, re.M)]
    assert "candidate regions (3;" in text and ids == [0, 1, 2]
    code, out, _ = _run(capsys, "partition", "--model", "resnet18", "--target", "edge-npu", "--json",
                        "--keep-on-host", "1")
    d = json.loads(out)
    assert code == 0 and [r["id"] for r in d["candidate_regions"]] == [0, 1, 2]
    assert d["num_functions"] == 2  # region 1 stayed on the host
