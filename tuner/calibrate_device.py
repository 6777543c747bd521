"""Measured device rows for ``accel-tune calibrate --measurements ROWS.jsonl --hw H`` and what the
analytical model says of each.

A row is one JSON object a line, the form of ``shared/oracle/llm/measured_ops.jsonl``: ``op``,
``shape`` (named dimensions), ``dtype``, ``measured_s`` (seconds per call, launch included);
other fields (``device``, ``hw``, ``source``) are kept but not read. The ops (``ROW_OPS``):
``matmul`` ([B,]M,K x K,N: dims ``M``, ``K``, ``N``, optional ``B``), ``softmax`` and
``layer_norm`` over the last axis of [M,N], element-wise ``add``/``mul``/``sub``/``div`` of two
[M,N] tensors and ``relu``/``gelu``/``sigmoid``/``tanh``/``exp`` of one. A row without
``measured_s`` is measured by ``--measurer CMD``: the row's JSON on its stdin, one JSON object
with ``measured_s`` on its stdout.

Each row becomes a one-node ONNX model (``onnx.helper``), imported like any model, and its node's
kernel (``sim.workload_of``) is simulated on ``hw`` at its default schedule (analytical
fidelity): ``kernel_sample`` turns the report into the calibration's ``OpSample`` (compute and
DRAM seconds, the launch latency); the same function gives the sample of a kernel when a device
calibration is applied (``Calibration.kernel_scale``).
"""
from __future__ import annotations

import json
import math
import shlex
import subprocess
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from .calibration import CalibrationError, OpSample

DTYPES = {"fp16": "float16", "float16": "float16", "half": "float16", "bf16": "float16", "bfloat16": "float16",
          "fp32": "float32", "float32": "float32", "float": "float32"}
BINARY = {"add": "Add", "mul": "Mul", "sub": "Sub", "div": "Div"}
UNARY = {"relu": "Relu", "gelu": "Gelu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp"}
ROW_OPS = ("matmul", "softmax", "layer_norm", *BINARY, *UNARY)
_DIMS = {"matmul": (("M", "K", "N"), ("B",))}
_MN = (("M", "N"), ())


@dataclass(frozen=True)
class DeviceRow:
    line: int
    op: str
    shape: Mapping[str, int]
    dtype: str
    measured_s: float | None
    raw: Mapping[str, Any]


def _bad(where: str, field: str, why: str) -> CalibrationError:
    return CalibrationError(f"{where}: field '{field}' {why}")


def parse_row(obj: Any, where: str, need_measured: bool = True) -> DeviceRow:
    """One row, checked; a problem is one line naming ``where`` (file:line) and the field."""
    if not isinstance(obj, dict):
        raise CalibrationError(f"{where}: not a JSON object")
    op = obj.get("op")
    if not isinstance(op, str) or op.lower().replace("layernorm", "layer_norm") not in ROW_OPS:
        raise _bad(where, "op", f"is {op!r}; expected one of {', '.join(ROW_OPS)}")
    op = op.lower().replace("layernorm", "layer_norm")
    shape = obj.get("shape")
    if not isinstance(shape, dict):
        raise _bad(where, "shape", "is missing or not an object of named dimensions")
    need, optional = _DIMS.get(op, _MN)
    for k in need:
        if k not in shape:
            raise _bad(where, "shape", f"has no dimension '{k}' (a {op} row needs {', '.join(need)})")
    for k, v in shape.items():
        if k not in need + optional:
            raise _bad(where, "shape", f"has dimension '{k}', which a {op} row does not take ({', '.join(need + optional)})")
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise _bad(where, "shape", f"dimension '{k}' is {v!r}, not a positive integer")
    dtype = obj.get("dtype", "fp32")
    if not isinstance(dtype, str) or dtype.lower() not in DTYPES:
        raise _bad(where, "dtype", f"is {dtype!r}; expected one of {', '.join(sorted(set(DTYPES)))}")
    m = obj.get("measured_s")
    if m is None and not need_measured:
        return DeviceRow(0, op, dict(shape), DTYPES[dtype.lower()], None, obj)
    if not isinstance(m, (int, float)) or isinstance(m, bool) or not math.isfinite(m) or m <= 0:
        raise _bad(where, "measured_s", f"is {m!r}, not a positive number of seconds")
    return DeviceRow(0, op, dict(shape), DTYPES[dtype.lower()], float(m), obj)


def read_rows(path: str, need_measured: bool = True) -> list[DeviceRow]:
    """The rows of a JSON-lines file (blank lines skipped); the first bad one is a one-line error."""
    rows = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.readlines()
    except FileNotFoundError:
        raise CalibrationError(f"measurements file not found: {path}") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CalibrationError(f"cannot read measurements file {path}: {e}") from None
    for i, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{path} line {i}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            raise CalibrationError(f"{where}: not valid JSON ({e.msg})") from None
        r = parse_row(obj, where, need_measured)
        rows.append(DeviceRow(i, r.op, r.shape, r.dtype, r.measured_s, r.raw))
    if not rows:
        raise CalibrationError(f"measurements file {path} has no rows")
    return rows


def measure_with(command: str, rows: Sequence[DeviceRow], path: str, timeout_s: float = 600.0) -> list[DeviceRow]:
    """Rows without ``measured_s`` measured by ``command`` (the row's JSON on stdin, a JSON object
    with ``measured_s`` on stdout)."""
    argv = shlex.split(command)
    if not argv:
        raise CalibrationError("--measurer: empty command")
    out = []
    for r in rows:
        if r.measured_s is not None:
            out.append(r)
            continue
        where = f"{path} line {r.line}"
        try:
            p = subprocess.run(argv, input=json.dumps(r.raw), capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CalibrationError(f"--measurer {argv[0]} on {where}: {e}") from None
        if p.returncode != 0:
            err = (p.stderr.strip().splitlines() or [f"exit status {p.returncode}"])[-1]
            raise CalibrationError(f"--measurer on {where} failed: {err}")
        try:
            got = json.loads(p.stdout)
        except json.JSONDecodeError:
            raise CalibrationError(f"--measurer on {where} printed no JSON object") from None
        checked = parse_row({**r.raw, "measured_s": got.get("measured_s") if isinstance(got, dict) else None},
                            f"--measurer output for {where}")
        out.append(DeviceRow(r.line, r.op, r.shape, r.dtype, checked.measured_s, {**r.raw, "measured_s": checked.measured_s}))
    return out


def row_model(row: DeviceRow):
    """The row as a one-node ONNX model (inputs only, no initializers)."""
    from onnx import helper
    et = helper.np_dtype_to_tensor_dtype(np.dtype(row.dtype))
    s = row.shape
    if row.op == "matmul":
        lead = [s["B"]] if "B" in s else []
        a, b, y = lead + [s["M"], s["K"]], [s["K"], s["N"]], lead + [s["M"], s["N"]]
        ins = [("a", a), ("b", b)]
        node = helper.make_node("MatMul", ["a", "b"], ["y"])
    else:
        y = [s["M"], s["N"]]
        if row.op == "softmax":
            ins, node = [("x", y)], helper.make_node("Softmax", ["x"], ["y"], axis=-1)
        elif row.op == "layer_norm":
            ins = [("x", y), ("g", [s["N"]]), ("b", [s["N"]])]
            node = helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)
        elif row.op in BINARY:
            ins, node = [("x", y), ("z", y)], helper.make_node(BINARY[row.op], ["x", "z"], ["y"])
        else:
            ins, node = [("x", y)], helper.make_node(UNARY[row.op], ["x"], ["y"])
    g = helper.make_graph([node], row.op, [helper.make_tensor_value_info(n, et, d) for n, d in ins],
                          [helper.make_tensor_value_info("y", et, y)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def row_node(row: DeviceRow):
    """The row's op as an IR node, through the ONNX importer (the path any model takes)."""
    import tempfile
    import os
    from partition import load_onnx
    with tempfile.TemporaryDirectory() as d:
        p = os.path.join(d, "row.onnx")
        with open(p, "wb") as f:
            f.write(row_model(row).SerializeToString())
        g = load_onnx(p)
    nodes = list(g.nodes)
    if len(nodes) != 1:  # the importer splits e.g. layer norm without support; cost the main node
        nodes = [max(nodes, key=lambda n: sum(int(np.prod(o.shape)) for o in n.outputs))]
    return nodes[0]


def kernel_sample(workload: Any, report: Any, hw: Any) -> OpSample:
    """A device kernel as a calibration sample: its simulated compute and DRAM seconds, the
    launch latency, and (total cycles / clock + launch) as the analytical seconds."""
    e = workload.operand_elems()
    clock = hw.clock_hz
    nbytes = float(report.dram_read_bytes + report.dram_write_bytes)
    flops = 2.0 * workload.macs if workload.is_mac else float(workload.d.get("ops", 0) or e["output"])
    launch = float(hw.link.launch_latency_s)
    dims = [v for v in workload.d.values() if isinstance(v, int) and v > 1]
    return OpSample(workload.op, flops, nbytes, float(e["output"]), float(e["ifmap"] + e["weight"]), len(dims),
                    2 if e["weight"] else 1, 1, 1, report.compute_cycles / clock,
                    nbytes / (hw.dram.bytes_per_cycle * clock), launch, report.total_cycles / clock + launch)


def row_sample(row: DeviceRow, hw: Any) -> OpSample:
    import sim
    try:
        wl = sim.workload_of(row_node(row))
        rep = sim.simulate(wl, hw, sim.default_schedule(wl, hw), fidelity="analytical")
    except ValueError as e:
        raise CalibrationError(f"line {row.line} ({row.op} {dict(row.shape)}): {str(e).splitlines()[0]}") from None
    return kernel_sample(wl, rep, hw)


def row_record(row: DeviceRow) -> dict:
    """What the data hash covers: the row's op, shape, dtype and measurement."""
    return {"op": row.op, "shape": dict(row.shape), "dtype": row.dtype, "measured_s": row.measured_s}


__all__ = ["DeviceRow", "ROW_OPS", "parse_row", "read_rows", "measure_with", "row_model", "row_node",
           "kernel_sample", "row_sample", "row_record"]
