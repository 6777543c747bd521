"""Sweep specs: parsing, ranges, tied axes, constraints, and one clear line per bad key."""
from __future__ import annotations

import json
import math

import pytest

from tuner.sweep import SpecError, enumerate_space, load_spec, parse_spec, point_at


def _spec(**over):
    d = {"base": "edge-npu", "axes": {"array.rows": [8, 16]}, "models": [{"name": "bert_tiny"}]}
    d.update(over)
    return d


def test_ranges_expand_inclusive():
    s = parse_spec(_spec(axes={"dram.bytes_per_cycle": {"start": 4, "stop": 16, "step": 4},
                               "buffers.weight_bytes": {"start": 1024, "stop": 8192, "factor": 2}}))
    vals = {a.key: [v[0] for v in a.values] for a in s.axes}
    assert vals["dram.bytes_per_cycle"] == [4, 8, 12, 16]
    assert vals["buffers.weight_bytes"] == [1024, 2048, 4096, 8192]
    assert s.grid_size == 16


def test_nested_axes_tables_and_tied_fields():
    s = parse_spec(_spec(axes={"array": {"rows": [8, 16]}, "array.cols,vector.lanes": [[4, 4], [32, 8]]}))
    assert [a.key for a in s.axes] == ["array.rows", "array.cols,vector.lanes"]
    p = point_at(s, 3)  # last axis fastest: rows=16, (cols, lanes)=(32, 8)
    assert (p.hw.array.rows, p.hw.array.cols, p.hw.vector.lanes) == (16, 32, 8)
    assert p.params() == {"array.rows": 16, "array.cols": 32, "vector.lanes": 8}


def test_grid_enumerates_every_point_and_constraints_filter():
    s = parse_spec(_spec(axes={"array.rows,array.cols": [8, 16, 32, 64]},
                         constraints={"max_area_mm2": 4.0}))
    sp = enumerate_space(s)
    areas = [p.hw.area_mm2() for p in sp.points]
    # Hand computation on edge-npu: 1.0 fixed + 384 KiB * 0.0025 + 16 lanes * 0.001 + PEs * 0.0006.
    expect = {n: 1.0 + 384 * 0.0025 + 16 * 0.001 + n * n * 0.0006 for n in (8, 16, 32, 64)}
    kept = [n for n in (8, 16, 32, 64) if expect[n] <= 4.0]
    assert [p.hw.array.rows for p in sp.points] == kept
    assert areas == pytest.approx([expect[n] for n in kept])
    assert sp.rejected == 4 - len(kept) and sp.examined == 4


def test_random_sampling_is_distinct_seeded_and_counted():
    d = _spec(axes={"array.rows": [4, 8, 16, 32], "array.cols": [4, 8, 16, 32],
                    "dram.bytes_per_cycle": [4.0, 8.0, 16.0]},
              sampling={"method": "random", "count": 10}, seed=3)
    a = enumerate_space(parse_spec(d))
    b = enumerate_space(parse_spec(d))
    c = enumerate_space(parse_spec({**d, "seed": 4}))
    assert len(a.points) == 10 and len({p.key for p in a.points}) == 10
    assert [p.index for p in a.points] == [p.index for p in b.points]
    assert [p.index for p in a.points] != [p.index for p in c.points]
    assert all(0 <= p.index < 48 for p in a.points)


def test_random_count_above_grid_gives_whole_grid():
    s = parse_spec(_spec(sampling={"method": "random", "count": 50}))
    assert sorted(p.index for p in enumerate_space(s).points) == [0, 1]


def test_toml_and_yaml_files_agree(tmp_path):
    (tmp_path / "s.toml").write_text('base = "edge-npu"\ntrials = 3\n[axes]\n"array.rows" = [8, 16]\n'
                                     '[[models]]\nname = "bert_tiny"\n')
    (tmp_path / "s.yaml").write_text('base: edge-npu\ntrials: 3\naxes:\n  array.rows: [8, 16]\n'
                                     'models:\n  - name: bert_tiny\n')
    a, b = load_spec(tmp_path / "s.toml"), load_spec(tmp_path / "s.yaml")
    assert a.to_dict() == b.to_dict()
    assert a.models[0].trials == 3
    json.dumps(a.to_dict())  # written beside results: must be JSON


def test_base_may_be_a_file_next_to_the_spec(tmp_path):
    (tmp_path / "hw.toml").write_text('base = "edge-npu"\n[array]\nrows = 12\n')
    (tmp_path / "s.toml").write_text('base = "hw.toml"\n[axes]\n"array.cols" = [4]\n[[models]]\nname = "bert_tiny"\n')
    s = load_spec(tmp_path / "s.toml")
    assert s.base_hw.array.rows == 12 and point_at(s, 0).hw.array.cols == 4


@pytest.mark.parametrize("over, needle", [
    ({"axis": {}}, "axis is not a known key"),
    ({"axes": {"array.rowz": [8]}}, 'axes."array.rowz"[0]: hardware.array.rowz is not a known field'),
    ({"axes": {"array.rows": [8, 0]}}, 'axes."array.rows"[1]: hardware.array.rows must be an integer from 1 to 4,096'),
    ({"axes": {"rows": [8]}}, "must look like section.field"),
    ({"axes": {"array.rows": []}}, 'axes."array.rows" is empty'),
    ({"axes": {"array.rows": 8}}, 'axes."array.rows" must be a list'),
    ({"axes": {"array.rows": [8, 8]}}, "lists a value twice"),
    ({"axes": {"array.rows": {"start": 8, "stop": 4, "step": 1}}}, "stop >= start"),
    ({"axes": {"array.rows": {"start": 8, "stop": 64}}}, "exactly one of 'step' or 'factor'"),
    ({"axes": {"array.rows": {"start": 8, "stop": 64, "fact": 2}}}, "fact is not a known key"),
    ({"axes": {"array.rows,array.cols": [[8, 8, 8]]}}, "must have 2 entries"),
    ({"axes": {"array.rows": [8], "array.rows,array.cols": [4]}}, "already sets"),
    ({"objective": "speed"}, "objective must be one of latency, energy, edp"),
    ({"base": "no-such-npu"}, "base: no hardware preset or file named 'no-such-npu'"),
    ({"sampling": {"method": "random"}}, "sampling.count is required"),
    ({"sampling": {"method": "sobol", "count": 3}}, "sampling.method must be one of grid, random"),
    ({"sampling": {"method": "grid", "count": 1}}, "below the grid's 2 points"),
    ({"constraints": {"max_power_w": 1}}, "constraints.max_power_w is not a known key"),
    ({"constraints": {"max_area_mm2": "big"}}, "constraints.max_area_mm2 must be a finite number"),
    ({"models": []}, "models must be a non-empty list"),
    ({"models": [{"name": "resnet19"}]}, "models[0].name: unknown model 'resnet19'"),
    ({"models": [{"name": "resnet18", "onnx": "x.onnx"}]}, "exactly one of 'name'"),
    ({"models": [{"onnx": "missing.onnx"}]}, "models[0].onnx: no file"),
    ({"models": [{"name": "resnet18", "trials": -1}]}, "models[0].trials must be an integer from 0 to 100,000"),
    ({"models": ["resnet18", "resnet18"]}, "label 'resnet18' appears twice"),
    ({"trials": 2.5}, "trials must be an integer"),
])
def test_bad_specs_name_the_key(over, needle):
    with pytest.raises(SpecError) as e:
        parse_spec(_spec(**over))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg


def test_file_errors_are_one_line(tmp_path):
    p = tmp_path / "bad.toml"
    p.write_text("base = \n")
    with pytest.raises(SpecError, match=r"cannot parse sweep spec .*bad.toml"):
        load_spec(p)
    with pytest.raises(SpecError, match="cannot read sweep spec"):
        load_spec(tmp_path / "none.toml")
    (tmp_path / "s.txt").write_text("x")
    with pytest.raises(SpecError, match=r"must end in \.toml"):
        load_spec(tmp_path / "s.txt")
    (tmp_path / "k.toml").write_text('base = "edge-npu"\nmodel = "x"\n')
    with pytest.raises(SpecError, match=r"^sweep spec k.toml: model is not a known key"):
        load_spec(tmp_path / "k.toml")


def test_an_invalid_combination_names_the_point(tmp_path):
    # Each value is valid alone; unified_bytes = 0 together with ifmap_bytes = 0 breaks a
    # cross-field rule, which only the point itself can report.
    (tmp_path / "hw.toml").write_text('base = "edge-npu"\n[buffers]\nunified_bytes = 65536\n')
    (tmp_path / "s.toml").write_text('base = "hw.toml"\n[axes]\n"buffers.unified_bytes" = [0]\n'
                                     '"buffers.ifmap_bytes" = [0]\n[[models]]\nname = "bert_tiny"\n')
    s = load_spec(tmp_path / "s.toml")
    with pytest.raises(SpecError, match=r"^point 0 \(buffers.unified_bytes=0, buffers.ifmap_bytes=0\): "
                                        r"hardware.buffers.ifmap_bytes must be > 0"):
        enumerate_space(s)


def test_edge_small_example_has_at_most_8_points():
    s = load_spec("experiments/sweeps/edge_small.toml")
    sp = enumerate_space(s)
    assert 1 <= len(sp.points) <= 8
    assert all(p.hw.area_mm2() <= 3.0 for p in sp.points)
    assert math.prod(len(a.values) for a in s.axes) == s.grid_size


def _dynamic_onnx(path):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 8), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)


def test_onnx_models_take_input_shapes(tmp_path):
    f = tmp_path / "dyn.onnx"
    _dynamic_onnx(f)
    (tmp_path / "bad.onnx").write_bytes(b"not an onnx file")
    s = parse_spec(_spec(models=[{"onnx": str(f), "input_shapes": {"x": [1, 16, 4]}}]))
    assert s.models[0].input_shapes == (("x", (1, 16, 4)),)
    assert s.to_dict()["models"][0]["input_shapes"] == {"x": [1, 16, 4]}
    from tuner.sweep.evaluate import WorkerState, model_graph
    assert model_graph(s.models[0], WorkerState()).inputs[0].shape == (1, 16, 4)
    for models, needle in (
            ([{"onnx": str(f)}], "models[0].onnx: input 'x' has a dynamic dimension 'seq' at axis 1"),
            ([{"onnx": str(f), "input_shapes": {"x": [1, 0, 4]}}], "input_shapes.x must be a list of positive"),
            ([{"onnx": str(f), "input_shapes": {"z": [1, 16, 4]}}], "which the model does not take"),
            ([{"onnx": str(tmp_path / "bad.onnx")}], "models[0].onnx: "),
            ([{"name": "bert_tiny", "input_shapes": {"x": [1]}}], "applies to 'onnx' models")):
        with pytest.raises(SpecError) as e:
            parse_spec(_spec(models=models))
        assert needle in str(e.value) and "\n" not in str(e.value)
